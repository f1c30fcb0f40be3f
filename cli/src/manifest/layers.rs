//! Layers: a user file and a project file (and any more given), read in order and merged. A later layer adds
//! agents, servers and models and may replace one by name, and it sets runtime settings; for what an agent may
//! do and spend it can only tighten: deny and ask rules add up (a deny is never lifted), the approval
//! threshold and timeout, quotas, budgets and rate limits keep the stricter of the two.

use super::diagnostic::{Code, ManifestError, Source, from_toml, source};
use super::{Manifest, Permissions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One manifest file, read.
#[derive(Debug, Clone)]
pub struct Layer {
    /// Where it is.
    pub path: PathBuf,
    /// Its name and text, for diagnostics.
    pub source: Source,
    /// What it says (with its `.mcp.json` imports added to its servers).
    pub manifest: Manifest,
}

impl Layer {
    /// The folder relative paths in it are read from.
    pub fn dir(&self) -> &Path {
        self.path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
    }
}

/// Every layer, and their merge with where each value came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The layers, first to last.
    pub layers: Vec<Layer>,
    /// The merged manifest.
    pub merged: Manifest,
    /// For each dotted key of the merged manifest (`agents.librarian`, `permissions.deny`), the files it came
    /// from.
    pub origins: BTreeMap<String, Vec<PathBuf>>,
}

impl Loaded {
    /// The folder of the last layer (the project's): the data folder is relative to it.
    pub fn dir(&self) -> &Path {
        self.layers.last().map_or(Path::new("."), Layer::dir)
    }
}

/// Reads one file as a layer.
pub fn read(path: &Path) -> Result<Layer, Vec<ManifestError>> {
    let text = std::fs::read_to_string(path).map_err(|err| {
        vec![ManifestError::whole(
            Code::Unreadable,
            format!(
                "cannot read the manifest {}: {err}; expected a TOML file (`agentry init` writes one)",
                path.display()
            ),
        )]
    })?;
    let source = source(path, &text);
    let mut manifest: Manifest = toml::from_str(&text).map_err(|err| vec![from_toml(&source, &err)])?;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut errors = Vec::new();
    for import in manifest.import_mcp_json.clone() {
        match super::mcp_json::import(&dir.join(import.get_ref())) {
            Ok(servers) => {
                for (name, server) in servers {
                    manifest.mcp_servers.entry(name).or_insert(server);
                }
            }
            Err(message) => {
                errors.push(ManifestError::at(Code::McpJson, &source, import.span(), message).label("imported here"))
            }
        }
    }
    if errors.is_empty() { Ok(Layer { path: path.to_owned(), source, manifest }) } else { Err(errors) }
}

/// Reads the layers in order and merges them.
pub fn load(paths: &[PathBuf]) -> Result<Loaded, Vec<ManifestError>> {
    let mut layers = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        match read(path) {
            Ok(layer) => layers.push(layer),
            Err(mut found) => errors.append(&mut found),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let (merged, origins) = merge(&layers);
    Ok(Loaded { layers, merged, origins })
}

/// Merges layers, first to last.
pub fn merge(layers: &[Layer]) -> (Manifest, BTreeMap<String, Vec<PathBuf>>) {
    let mut merged = Manifest::default();
    let mut origins: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let mut from = |key: String, path: &Path, replace: bool| {
        let entry = origins.entry(key).or_default();
        if replace {
            entry.clear();
        }
        if !entry.iter().any(|p| p == path) {
            entry.push(path.to_owned());
        }
    };
    for (n, layer) in layers.iter().enumerate() {
        let m = &layer.manifest;
        let path = layer.path.as_path();
        let defaults = super::RuntimeSection::default();
        if n == 0 || m.runtime.data != defaults.data {
            merged.runtime.data = m.runtime.data.clone();
            from("runtime.data".into(), path, true);
        }
        if n == 0 || m.runtime.store != defaults.store {
            merged.runtime.store = m.runtime.store;
            from("runtime.store".into(), path, true);
        }
        if m.runtime.hibernate_after.is_some() {
            merged.runtime.hibernate_after = m.runtime.hibernate_after.clone();
            from("runtime.hibernate_after".into(), path, true);
        }
        if m.runtime.keep_history {
            merged.runtime.keep_history = true;
            from("runtime.keep_history".into(), path, true);
        }
        if m.runtime.snapshot_every.is_some() {
            merged.runtime.snapshot_every = m.runtime.snapshot_every;
            from("runtime.snapshot_every".into(), path, true);
        }
        for (id, agent) in &m.agents {
            merged.agents.insert(id.clone(), agent.clone());
            from(format!("agents.{id}"), path, true);
        }
        for (name, server) in &m.mcp_servers {
            merged.mcp_servers.insert(name.clone(), server.clone());
            from(format!("mcp_servers.{name}"), path, true);
        }
        for (name, model) in &m.models {
            merged.models.insert(name.clone(), model.clone());
            from(format!("models.{name}"), path, true);
        }
        for key in tighten_permissions(&mut merged.permissions, &m.permissions) {
            from(format!("permissions.{key}"), path, false);
        }
        for (pattern, budget) in &m.budgets {
            let stricter = merged.budgets.get(pattern).is_none_or(|b| budget.limit < b.limit);
            if stricter {
                merged.budgets.insert(pattern.clone(), budget.clone());
                from(format!("budgets.\"{}\"", pattern.get_ref()), path, true);
            }
        }
        for (pattern, rate) in &m.rate_limits {
            let slower = merged.rate_limits.get(pattern).is_none_or(|r| {
                let per = |x: &super::RateSection| super::durations::parse(&x.per).unwrap_or_default();
                // Fewer runs per unit of time: runs / per is smaller.
                f64::from(rate.runs) * per(r).as_secs_f64() < f64::from(r.runs) * per(rate).as_secs_f64()
            });
            if slower {
                merged.rate_limits.insert(pattern.clone(), rate.clone());
                from(format!("rate_limits.\"{}\"", pattern.get_ref()), path, true);
            }
        }
        merged.import_mcp_json.extend(m.import_mcp_json.iter().cloned());
    }
    (merged, origins)
}

/// Adds a later layer's permissions to the merged ones, tightening only; returns the keys it set.
fn tighten_permissions(merged: &mut Permissions, later: &Permissions) -> Vec<&'static str> {
    let mut set = Vec::new();
    for (key, mine, theirs) in [
        ("allow", &mut merged.allow, &later.allow),
        ("ask", &mut merged.ask, &later.ask),
        ("deny", &mut merged.deny, &later.deny),
        ("grants", &mut merged.grants, &later.grants),
    ] {
        for rule in theirs {
            if !mine.iter().any(|r| r.get_ref() == rule.get_ref()) {
                mine.push(rule.clone());
            }
        }
        if !theirs.is_empty() {
            set.push(key);
        }
    }
    for host in &later.hosts {
        if !merged.hosts.contains(host) {
            merged.hosts.push(host.clone());
        }
    }
    if !later.hosts.is_empty() {
        set.push("hosts");
    }
    if let Some(risk) = &later.approval_at {
        let rank = |r: &str| ["low", "medium", "high", "never"].iter().position(|x| *x == r).unwrap_or(0);
        if merged.approval_at.as_ref().is_none_or(|m| rank(risk.get_ref()) < rank(m.get_ref())) {
            merged.approval_at = Some(risk.clone());
            set.push("approval_at");
        }
    }
    if let Some(timeout) = &later.approval_timeout {
        let shorter = merged.approval_timeout.as_ref().is_none_or(|m| {
            super::durations::parse(timeout).unwrap_or_default() < super::durations::parse(m).unwrap_or_default()
        });
        if shorter {
            merged.approval_timeout = Some(timeout.clone());
            set.push("approval_timeout");
        }
    }
    for (key, mine, theirs) in [
        ("drive_quota_bytes", &mut merged.drive_quota_bytes, later.drive_quota_bytes),
        ("drive_quota_files", &mut merged.drive_quota_files, later.drive_quota_files),
    ] {
        if let Some(theirs) = theirs
            && mine.is_none_or(|m| theirs < m)
        {
            *mine = Some(theirs);
            set.push(key);
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("written");
        path
    }

    #[test]
    fn a_later_layer_tightens_and_never_lifts_a_deny() {
        let dir = tempfile::tempdir().expect("a folder");
        let user = layer(
            dir.path(),
            "user.toml",
            "[permissions]\ndeny = [\"fs.delete\"]\napproval_at = \"medium\"\n\n[budgets]\n\"**\" = { limit = 100, window = \"1h\" }\n",
        );
        let project = layer(
            dir.path(),
            "agentry.toml",
            "[permissions]\nallow = [\"fs.*\"]\napproval_at = \"high\"\nask = [\"fs.write\"]\n\n[budgets]\n\"**\" = { limit = 1000, window = \"1h\" }\n\n[runtime]\ndata = \"state\"\n",
        );
        let loaded = load(&[user.clone(), project.clone()]).expect("both parse");
        let p = &loaded.merged.permissions;
        assert_eq!(p.deny.iter().map(|r| r.get_ref().as_str()).collect::<Vec<_>>(), ["fs.delete"]);
        assert_eq!(p.ask.iter().map(|r| r.get_ref().as_str()).collect::<Vec<_>>(), ["fs.write"]);
        assert_eq!(p.approval_at.as_ref().map(|r| r.get_ref().as_str()), Some("medium"), "the lower threshold stays");
        let budget = loaded.merged.budgets.values().next().expect("one budget");
        assert_eq!(budget.limit, 100.0, "the smaller budget stays");
        assert_eq!(loaded.merged.runtime.data, PathBuf::from("state"), "runtime settings: the later layer sets them");
        assert_eq!(loaded.origins["permissions.deny"], [user]);
        assert_eq!(loaded.origins["runtime.data"], [project]);
        // The policy: the user's deny holds though the project allows `fs.*`.
        let agent: crate::manifest::AgentSection = toml::from_str("type = \"tools\"").expect("an agent");
        let policy = crate::manifest::policy::for_agent(&loaded.merged, &agent).expect("a policy");
        let spec = agentry::action::ActionSpec::new("fs.delete", "Deletes.").expect("a spec");
        assert!(matches!(policy.may_run(&spec), agentry::policy::RunDecision::Deny { .. }));
    }
}
