//! `agentry config show`: the manifest, or with `--resolved` every layer merged, each value with the file it
//! came from.

use crate::error::CliError;
use crate::manifest::Loaded;
use std::process::ExitCode;

/// Prints the manifest.
pub fn show(loaded: &Loaded, resolved: bool) -> Result<ExitCode, CliError> {
    if !resolved {
        let last = loaded.layers.last().map(|l| l.source.inner().clone()).unwrap_or_default();
        print!("{last}");
        return Ok(ExitCode::SUCCESS);
    }
    let value = toml::Value::try_from(&loaded.merged).map_err(|e| CliError::Usage(e.to_string()))?;
    let mut lines = Vec::new();
    flatten("", &value, &mut lines);
    for (key, text) in lines {
        let origin = origin_of(loaded, &key).unwrap_or_else(|| "default".to_owned());
        println!("{key} = {text}    # {origin}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The files a dotted key came from: the entry's own, or its section's.
fn origin_of(loaded: &Loaded, key: &str) -> Option<String> {
    let mut probe = key.to_owned();
    loop {
        if let Some(files) = loaded.origins.get(&probe) {
            return Some(files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(" + "));
        }
        let cut = probe.rfind('.')?;
        probe.truncate(cut);
    }
}

fn flatten(prefix: &str, value: &toml::Value, out: &mut Vec<(String, String)>) {
    match value {
        toml::Value::Table(table) => {
            for (key, value) in table {
                let key = if key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                    key.clone()
                } else {
                    format!("\"{key}\"")
                };
                let path = if prefix.is_empty() { key } else { format!("{prefix}.{key}") };
                flatten(&path, value, out);
            }
        }
        other => out.push((prefix.to_owned(), other.to_string())),
    }
}
