//! llama.cpp's OpenAI-compatible server (`llama-cpp-python[server]`) serving SmolLM2-135M-Instruct on loopback:
//! a real LLM server for the tests, installed once by `tests/llama/install.sh` into a cache outside the clone.
//! A test that cannot install or start it skips, saying so loudly.

use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The installed server's folder, or why there is none.
pub fn installed() -> Result<std::path::PathBuf, String> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("llama/install.sh");
    let out = std::process::Command::new("bash").arg(&script).output().map_err(|e| format!("bash: {e}"))?;
    if !out.status.success() {
        return Err(format!("{} failed: {}", script.display(), String::from_utf8_lossy(&out.stderr)));
    }
    let home = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim().to_owned();
    Ok(std::path::PathBuf::from(home))
}

/// Starts the server on a free loopback port; returns it (killed when dropped) and its base URL, once it says
/// it listens.
pub async fn serve(home: &std::path::Path) -> Result<(tokio::process::Child, String), String> {
    let port =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| e.to_string())?.port();
    let mut child = tokio::process::Command::new(home.join("venv/bin/python"))
        .args(["-m", "llama_cpp.server", "--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--chat_format", "chatml-function-calling", "--n_ctx", "2048", "--model"])
        .arg(home.join("SmolLM2-135M-Instruct.Q4_1.gguf"))
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("the server did not start: {e}"))?;
    let mut lines = BufReader::new(child.stderr.take().ok_or("no stderr")?).lines();
    let listening = async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("Uvicorn running on") {
                return Ok(());
            }
        }
        Err("the server ended before it listened".to_owned())
    };
    tokio::time::timeout(Duration::from_secs(120), listening)
        .await
        .map_err(|_| "not listening after 120 s".to_owned())??;
    // Its log keeps coming: read on, so the pipe never fills; its errors are shown, for a failing test to say why.
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("Error") {
                eprintln!("llama.cpp's server: {line}");
            }
        }
    });
    Ok((child, format!("http://127.0.0.1:{port}/v1")))
}
