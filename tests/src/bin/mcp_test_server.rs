//! A small MCP server for agentry's MCP tests, written with rmcp's server macros: tools that echo, fail, hang,
//! take their time, tell their process id, add or remove tools at run time (sending `tools/list_changed`), and
//! `measure`, which declares an `outputSchema` and, asked to, answers with `structuredContent` that breaks it.
//!
//! `mcp_test_server` speaks MCP on stdin and stdout; `mcp_test_server --http 127.0.0.1:0` serves streamable
//! HTTP at `/mcp` and prints `http://<address>/mcp` on its first line of stdout.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt, schemars, tool, tool_router};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many tools one `tools/list` page holds.
const PAGE: usize = 3;

#[derive(Deserialize, schemars::JsonSchema)]
struct Text {
    /// The text.
    text: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Millis {
    /// How long, in milliseconds.
    ms: u64,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Name {
    /// The tool's name.
    name: String,
}

#[derive(Clone)]
struct TestServer {
    router: ToolRouter<Self>,
    /// Tools added at run time; each answers with its own name.
    added: Arc<Mutex<BTreeSet<String>>>,
}

fn lock(added: &Mutex<BTreeSet<String>>) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
    added.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[tool_router]
impl TestServer {
    fn new() -> Self {
        Self { router: Self::tool_router(), added: Arc::default() }
    }

    #[tool(description = "Echoes the text.", annotations(read_only_hint = true, open_world_hint = false))]
    async fn echo(&self, Parameters(Text { text }): Parameters<Text>) -> String {
        text
    }

    #[tool(
        description = "Always fails with the text as its error.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn fail(&self, Parameters(Text { text }): Parameters<Text>) -> Result<String, String> {
        Err(text)
    }

    #[tool(description = "Never answers.", annotations(read_only_hint = true, open_world_hint = false))]
    async fn hang(&self) -> String {
        std::future::pending::<()>().await;
        String::new()
    }

    #[tool(
        description = "Answers after a while; says it has side effects, so a failed call is not retried.",
        annotations(destructive_hint = false, idempotent_hint = false, open_world_hint = false)
    )]
    async fn slow(&self, Parameters(Millis { ms }): Parameters<Millis>) -> String {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        "done".to_owned()
    }

    #[tool(description = "This process's id.", annotations(read_only_hint = true, open_world_hint = false))]
    async fn pid(&self) -> String {
        std::process::id().to_string()
    }

    #[tool(
        description = "Adds a tool.",
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn add_tool(&self, peer: Peer<RoleServer>, Parameters(Name { name }): Parameters<Name>) -> String {
        lock(&self.added).insert(name.clone());
        let _ = peer.notify_tool_list_changed().await;
        format!("added {name}")
    }

    #[tool(
        description = "Removes a tool added before.",
        annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn remove_tool(&self, peer: Peer<RoleServer>, Parameters(Name { name }): Parameters<Name>) -> String {
        lock(&self.added).remove(&name);
        let _ = peer.notify_tool_list_changed().await;
        format!("removed {name}")
    }
}

/// `measure`: a temperature whose `outputSchema` says `celsius` is a number; `{"lie": true}` makes it a string.
fn measure_tool() -> Tool {
    let object = |value: serde_json::Value| value.as_object().cloned().unwrap_or_default();
    let params = object(serde_json::json!({"type": "object", "properties": {"lie": {"type": "boolean"}}}));
    let output = object(serde_json::json!({
        "type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]
    }));
    let annotations = ToolAnnotations::new().read_only(true).open_world(false);
    Tool::new("measure", "A temperature, structured.", params)
        .with_raw_output_schema(Arc::new(output))
        .with_annotations(annotations)
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
            .with_server_info(Implementation::new("mcp-test-server", "1.2.3"))
    }

    /// Lists in pages of [`PAGE`] tools, so clients must follow the cursor.
    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = self.router.list_all();
        tools.push(measure_tool());
        for name in lock(&self.added).iter() {
            let schema = serde_json::json!({"type": "object"});
            let schema = schema.as_object().cloned().unwrap_or_default();
            let annotations = ToolAnnotations::new().read_only(true).open_world(false);
            tools.push(Tool::new(name.clone(), "A tool added at run time.", schema).with_annotations(annotations));
        }
        let start: usize = match request.and_then(|r| r.cursor) {
            Some(cursor) => cursor.parse().map_err(|_| ErrorData::invalid_params("bad cursor", None))?,
            None => 0,
        };
        let page: Vec<Tool> = tools.iter().skip(start).take(PAGE).cloned().collect();
        let mut result = ListToolsResult::with_all_items(page);
        if start + PAGE < tools.len() {
            result.next_cursor = Some((start + PAGE).to_string());
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == "measure" {
            let lie = request.arguments.as_ref().and_then(|a| a.get("lie")).and_then(serde_json::Value::as_bool);
            let celsius = if lie == Some(true) { serde_json::json!("hot") } else { serde_json::json!(21.5) };
            return Ok(CallToolResult::structured(serde_json::json!({"celsius": celsius})).into());
        }
        if lock(&self.added).contains(request.name.as_ref()) {
            let text = format!("{} answers", request.name);
            return Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into());
        }
        self.router.call(ToolCallContext::new(self, request, context)).await
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--http") {
        let address = args.get(at + 1).map_or("127.0.0.1:0", String::as_str);
        let listener = tokio::net::TcpListener::bind(address).await?;
        println!("http://{}/mcp", listener.local_addr()?);
        use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
        use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
        let service: StreamableHttpService<TestServer, LocalSessionManager> =
            StreamableHttpService::new(|| Ok(TestServer::new()), Arc::default(), StreamableHttpServerConfig::default());
        axum::serve(listener, axum::Router::new().nest_service("/mcp", service)).await?;
        return Ok(());
    }
    let running = TestServer::new().serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
