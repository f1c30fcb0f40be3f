//! The OpenAI-compatible client against a provider on loopback answering with wire fixtures written from
//! OpenAI's documented formats: whole and streamed answers, parallel tool calls assembled from fragments,
//! rate limits told from an exhausted quota, and requests the provider refused never sent again.

mod support;

use agentry_llm::chat::{
    ChatRequest, Delta, FinishReason, Message, Part, Role, ToolCall, ToolChoice, ToolDef, ToolResult,
};
use agentry_llm::openai::{OpenAi, OpenAiConfig};
use agentry_llm::{ChatModel, ModelError, RetryPolicy, complete};
use serde_json::json;
use std::sync::Mutex;
use std::time::Duration;
use support::{Provider, Reply};

fn config(provider: &Provider, stream: bool) -> OpenAiConfig {
    OpenAiConfig { stream, ..OpenAiConfig::new(format!("{}/v1", provider.base_url)) }
}

fn request() -> ChatRequest {
    let mut request = ChatRequest::new(
        "gpt-4.1-mini",
        vec![
            Message::user("What is in notes.md?"),
            Message {
                role: Role::Assistant,
                parts: vec![Part::ToolCall(ToolCall {
                    id: "call_0".into(),
                    name: "fs__stat".into(),
                    arguments: r#"{"path": "notes.md"}"#.into(),
                })],
            },
            Message::tool_results(vec![ToolResult {
                call_id: "call_0".into(),
                content: "no such file".into(),
                is_error: true,
            }]),
        ],
    );
    request.system = Some("You help with files.".into());
    request.tools = vec![ToolDef {
        name: "fs__read".into(),
        description: "Reads a file.".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    }];
    request.tool_choice = ToolChoice::Tool("fs__read".into());
    request.max_tokens = Some(256);
    request
}

#[tokio::test]
async fn a_whole_answer_with_parallel_tool_calls_is_read() {
    let provider = Provider::start(vec![Reply::json(200, "openai/tool_calls.json")]).await;
    let model = OpenAi::new(config(&provider, false)).expect("a client");
    let answer = model.complete(&request(), &|_| panic!("a whole answer streams nothing")).await.expect("an answer");
    let calls: Vec<_> = answer.message.tool_calls().cloned().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!((calls[0].id.as_str(), calls[0].name.as_str()), ("call_weather", "weather__now"));
    assert_eq!(calls[1].parsed_arguments(), Ok(json!({"timezone": "Europe/Paris"})));
    assert_eq!(answer.finish, FinishReason::ToolCalls);
    assert_eq!((answer.usage.input_tokens, answer.usage.output_tokens), (82, 41));
    assert_eq!(answer.model, "gpt-4.1-mini-2025-04-14");
}

#[tokio::test]
async fn the_request_is_openais_format() {
    let provider = Provider::start(vec![Reply::json(200, "openai/tool_calls.json")]).await;
    let model =
        OpenAi::new(OpenAiConfig { api_key_env: Some("PATH".into()), ..config(&provider, false) }).expect("a client");
    model.complete(&request(), &|_| {}).await.expect("an answer");
    let sent = provider.received().pop().expect("one request");
    assert_eq!(sent.path, "/v1/chat/completions");
    let key = std::env::var("PATH").expect("PATH is set");
    assert_eq!(sent.headers["authorization"], format!("Bearer {}", key.trim()), "the key from the named variable");
    let body = sent.body;
    assert_eq!(body["messages"][0], json!({"role": "system", "content": "You help with files."}));
    assert_eq!(body["messages"][1], json!({"role": "user", "content": "What is in notes.md?"}));
    assert_eq!(
        body["messages"][2]["tool_calls"][0],
        json!({"id": "call_0", "type": "function", "function": {"name": "fs__stat", "arguments": "{\"path\": \"notes.md\"}"}})
    );
    assert_eq!(
        body["messages"][3],
        json!({"role": "tool", "tool_call_id": "call_0", "content": "error: no such file"})
    );
    assert_eq!(body["tools"][0]["function"]["name"], "fs__read");
    assert_eq!(body["tool_choice"], json!({"type": "function", "function": {"name": "fs__read"}}));
    assert_eq!(body["max_tokens"], 256);
    assert!(body.get("stream").is_none());
}

#[tokio::test]
async fn a_streamed_answer_passes_text_on_and_assembles_tool_calls() {
    let provider = Provider::start(vec![Reply::sse("openai/stream_tool_calls.sse")]).await;
    let model = OpenAi::new(config(&provider, true)).expect("a client");
    let seen = Mutex::new(Vec::new());
    let answer = model.complete(&request(), &|delta| seen.lock().unwrap().push(delta)).await.expect("an answer");
    let sent = provider.received().pop().expect("one request").body;
    assert_eq!((sent["stream"].clone(), sent["stream_options"].clone()), (json!(true), json!({"include_usage": true})));
    assert_eq!(
        seen.into_inner().unwrap(),
        vec![
            Delta::Text { text: "Let me ".into() },
            Delta::Text { text: "check.".into() },
            Delta::ToolCall { index: 0, name: "fs__read".into() },
            Delta::ToolCall { index: 1, name: "fs__list".into() },
        ]
    );
    assert_eq!(answer.message.text(), "Let me check.");
    let calls: Vec<_> = answer.message.tool_calls().cloned().collect();
    assert_eq!(
        calls[0],
        ToolCall { id: "call_a".into(), name: "fs__read".into(), arguments: r#"{"path": "notes.md"}"#.into() }
    );
    assert_eq!(calls[1].parsed_arguments(), Ok(json!({"path": "."})));
    assert_eq!(answer.finish, FinishReason::ToolCalls);
    assert_eq!((answer.usage.input_tokens, answer.usage.output_tokens), (120, 37));
}

#[tokio::test]
async fn a_rate_limit_is_waited_out_as_the_provider_asks() {
    let limited = Reply::json(429, "openai/rate_limited.json").with_header("retry-after", "0");
    let provider = Provider::start(vec![limited, Reply::json(200, "openai/tool_calls.json")]).await;
    let model = OpenAi::new(config(&provider, false)).expect("a client");
    let answer = complete(&model, &request(), &|_| {}, RetryPolicy::default(), 1).await.expect("an answer in the end");
    assert_eq!(answer.message.tool_calls().count(), 2);
    assert_eq!(provider.received().len(), 2, "asked again once");
}

#[tokio::test]
async fn an_exhausted_quota_is_not_a_rate_limit_and_is_not_tried_again() {
    let provider = Provider::start(vec![Reply::json(429, "openai/insufficient_quota.json")]).await;
    let model = OpenAi::new(config(&provider, false)).expect("a client");
    let error = complete(&model, &request(), &|_| {}, RetryPolicy::default(), 1).await.expect_err("no quota");
    assert!(
        matches!(&error, ModelError::QuotaExhausted { message } if message.contains("exceeded your current quota")),
        "{error}"
    );
    assert_eq!(provider.received().len(), 1);
}

#[tokio::test]
async fn a_request_the_provider_refused_is_not_sent_again() {
    let provider = Provider::start(vec![Reply::json(400, "openai/bad_request.json")]).await;
    let model = OpenAi::new(config(&provider, false)).expect("a client");
    let error = complete(&model, &request(), &|_| {}, RetryPolicy::default(), 1).await.expect_err("refused");
    assert!(
        matches!(&error, ModelError::Rejected { status: 400, message } if message.contains("tool_call_id")),
        "{error}"
    );
    assert_eq!(provider.received().len(), 1);
}

#[tokio::test]
async fn a_provider_failing_on_its_side_is_tried_again_then_given_up_on() {
    let failing = || Reply::json(503, "openai/rate_limited.json").with_header("retry-after", "0");
    let provider = Provider::start(vec![failing(), failing(), failing()]).await;
    let model = OpenAi::new(config(&provider, false)).expect("a client");
    let retry = RetryPolicy { max_attempts: 3, base: Duration::ZERO, max_wait: Duration::from_secs(1) };
    let error = complete(&model, &request(), &|_| {}, retry, 1).await.expect_err("down");
    assert!(matches!(error, ModelError::Unavailable { status: 503, .. }), "{error}");
    assert_eq!(provider.received().len(), 3, "every attempt the policy allows");
}

#[tokio::test]
async fn a_stream_that_stops_short_or_speaks_nonsense_is_an_error_not_an_answer() {
    let short = Reply {
        body: b"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n".to_vec(),
        ..Reply::sse("openai/stream_tool_calls.sse")
    };
    let nonsense = Reply { body: b"data: {not json\n\n".to_vec(), ..Reply::sse("openai/stream_tool_calls.sse") };
    let provider = Provider::start(vec![short, nonsense]).await;
    let model = OpenAi::new(config(&provider, true)).expect("a client");
    let cut = model.complete(&request(), &|_| {}).await.expect_err("cut short");
    assert!(matches!(cut, ModelError::Transport(ref m) if m.contains("ended before")), "{cut}");
    let garbled = model.complete(&request(), &|_| {}).await.expect_err("garbled");
    assert!(matches!(garbled, ModelError::Malformed(_)), "{garbled}");
}

#[tokio::test]
async fn a_stream_without_end_is_cut_off_at_the_limit() {
    let piece = "x".repeat(64 * 1024);
    let chunk = format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{piece}\"}}}}]}}\n\n");
    let body = chunk.repeat(agentry_llm::MAX_ANSWER_BYTES / piece.len() + 2).into_bytes();
    let provider = Provider::start(vec![Reply { body, ..Reply::sse("openai/stream_tool_calls.sse") }]).await;
    let model = OpenAi::new(config(&provider, true)).expect("a client");
    let error = model.complete(&request(), &|_| {}).await.expect_err("too long");
    assert!(matches!(error, ModelError::Malformed(ref m) if m.contains("more than")), "{error}");
}

#[test]
fn a_key_named_but_not_set_is_a_typed_error_at_start() {
    let mut config = OpenAiConfig::new("http://127.0.0.1:9/v1");
    config.api_key_env = Some("AGENTRY_TEST_KEY_THAT_IS_NEVER_SET".into());
    let error = OpenAi::new(config).expect_err("no key");
    assert_eq!(error, ModelError::MissingKey("AGENTRY_TEST_KEY_THAT_IS_NEVER_SET".into()));
    assert!(error.to_string().contains("expected it to be set"));
}

/// llama.cpp's server repeats the call's id and whole name in every fragment, and reports no usage when it
/// streams (recorded from `llama_cpp.server` 0.3.36 serving SmolLM2 with `chatml-function-calling`).
#[tokio::test]
async fn llama_cpps_stream_is_read_too() {
    let provider = Provider::start(vec![Reply::sse("openai/llama_cpp_stream.sse")]).await;
    let model = OpenAi::new(config(&provider, true)).expect("a client");
    let answer = model.complete(&request(), &|_| {}).await.expect("an answer");
    let call = answer.message.tool_calls().next().expect("a call").clone();
    assert_eq!(call.name, "notes__read", "the name is not repeated");
    assert!(call.parsed_arguments().is_ok_and(|a| a.is_object()), "{call:?}");
    assert_eq!(answer.finish, FinishReason::ToolCalls);
    assert!(answer.usage.estimated && answer.usage.input_tokens > 0, "estimated, and said so: {:?}", answer.usage);
}

/// Embeddings score tools by meaning: the question and each description in one request, cosine similarity each
/// (the answer's `index` orders them, whatever order they come in).
#[tokio::test]
async fn embeddings_score_tools_by_meaning() {
    use agentry_llm::openai::Embeddings;
    use agentry_llm::select::SemanticScorer;
    let provider = Provider::start(vec![Reply::json(200, "openai/embeddings.json")]).await;
    let scorer = Embeddings::new(config(&provider, false), "text-embedding-3-small").expect("a client");
    let tools = vec![
        ToolDef { name: "fs__read".into(), description: "Reads a file.".into(), parameters: json!({}) },
        ToolDef { name: "time__now".into(), description: "The time.".into(), parameters: json!({}) },
    ];
    let similarities = scorer.similarities("how late is it?", &tools).await.expect("similarities");
    assert_eq!(similarities.len(), 2);
    assert!(similarities[0].abs() < 1e-9, "orthogonal: {similarities:?}");
    assert!(similarities[1] > 0.9, "close: {similarities:?}");
    let sent = provider.received().pop().expect("a request");
    assert_eq!(sent.path, "/v1/embeddings");
    assert_eq!(sent.body["input"], json!(["how late is it?", "fs__read: Reads a file.", "time__now: The time."]));
}
