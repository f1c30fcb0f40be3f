//! The Anthropic client against a provider on loopback answering with wire fixtures written from Anthropic's
//! documented Messages API: content blocks, streamed events with tool input in JSON fragments, and errors
//! (overloaded in the middle of a stream, rate limits, billing) sorted into what may be tried again.

mod support;

use agentry_llm::anthropic::{API_VERSION, Anthropic, AnthropicConfig};
use agentry_llm::chat::{
    ChatRequest, Delta, FinishReason, Message, Part, Role, ToolCall, ToolChoice, ToolDef, ToolResult,
};
use agentry_llm::{ChatModel, ModelError, RetryPolicy, complete};
use serde_json::json;
use std::sync::Mutex;
use support::{Provider, Reply};

fn config(provider: &Provider, stream: bool) -> AnthropicConfig {
    // A variable that is always set stands in for the key: the test reads it back from the header.
    AnthropicConfig {
        base_url: provider.base_url.clone(),
        api_key_env: "PATH".into(),
        stream,
        ..AnthropicConfig::default()
    }
}

fn request() -> ChatRequest {
    let mut request = ChatRequest::new(
        "claude-sonnet-4-5",
        vec![
            Message::user("Weather in SF?"),
            Message {
                role: Role::Assistant,
                parts: vec![Part::ToolCall(ToolCall {
                    id: "toolu_0".into(),
                    name: "geo__find".into(),
                    arguments: r#"{"q": "SF"}"#.into(),
                })],
            },
            Message::tool_results(vec![ToolResult {
                call_id: "toolu_0".into(),
                content: "not found".into(),
                is_error: true,
            }]),
        ],
    );
    request.system = Some("Be brief.".into());
    request.tools = vec![ToolDef {
        name: "weather__now".into(),
        description: "The weather now.".into(),
        parameters: json!({"type": "object", "properties": {"location": {"type": "string"}}}),
    }];
    request.tool_choice = ToolChoice::Required;
    request
}

#[tokio::test]
async fn the_request_is_anthropics_format() {
    let provider = Provider::start(vec![Reply::json(200, "anthropic/tool_use.json")]).await;
    let model = Anthropic::new(config(&provider, false)).expect("a client");
    model.complete(&request(), &|_| {}).await.expect("an answer");
    let sent = provider.received().pop().expect("one request");
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.headers["anthropic-version"], API_VERSION);
    assert_eq!(sent.headers["x-api-key"], std::env::var("PATH").expect("PATH is set").trim());
    let body = sent.body;
    assert_eq!(body["system"], "Be brief.");
    assert_eq!(body["max_tokens"], 4096, "the API requires a limit");
    assert_eq!(
        body["messages"][1]["content"][0],
        json!({"type": "tool_use", "id": "toolu_0", "name": "geo__find", "input": {"q": "SF"}})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0", "content": "not found", "is_error": true}]})
    );
    assert_eq!(body["tools"][0]["input_schema"]["properties"]["location"]["type"], "string");
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
}

#[tokio::test]
async fn a_whole_answer_is_read() {
    let provider = Provider::start(vec![Reply::json(200, "anthropic/tool_use.json")]).await;
    let model = Anthropic::new(config(&provider, false)).expect("a client");
    let answer = model.complete(&request(), &|_| {}).await.expect("an answer");
    assert_eq!(answer.message.text(), "I'll look up the time there.");
    let call = answer.message.tool_calls().next().expect("a call").clone();
    assert_eq!((call.id.as_str(), call.name.as_str()), ("toolu_01A09q90qw90lq917835lq9", "time__now"));
    assert_eq!(call.parsed_arguments(), Ok(json!({"timezone": "Asia/Tokyo"})));
    assert_eq!(answer.finish, FinishReason::ToolCalls);
    assert_eq!((answer.usage.input_tokens, answer.usage.output_tokens), (472, 58));
}

#[tokio::test]
async fn a_streamed_answer_passes_text_on_and_assembles_the_tool_input() {
    let provider = Provider::start(vec![Reply::sse("anthropic/stream_tool_use.sse")]).await;
    let model = Anthropic::new(config(&provider, true)).expect("a client");
    let seen = Mutex::new(Vec::new());
    let answer = model.complete(&request(), &|delta| seen.lock().unwrap().push(delta)).await.expect("an answer");
    assert_eq!(provider.received()[0].body["stream"], true);
    assert_eq!(
        seen.into_inner().unwrap(),
        vec![
            Delta::Text { text: "Okay, let".into() },
            Delta::Text { text: "'s check.".into() },
            Delta::ToolCall { index: 1, name: "weather__now".into() },
        ]
    );
    let call = answer.message.tool_calls().next().expect("a call").clone();
    assert_eq!(call.parsed_arguments(), Ok(json!({"location": "San Francisco, CA"})));
    assert_eq!(answer.finish, FinishReason::ToolCalls);
    assert_eq!((answer.usage.input_tokens, answer.usage.output_tokens), (472, 89));
}

#[tokio::test]
async fn an_overload_in_the_middle_of_a_stream_is_tried_again() {
    let provider = Provider::start(vec![
        Reply::sse("anthropic/stream_overloaded.sse"),
        Reply::sse("anthropic/stream_tool_use.sse"),
    ])
    .await;
    let model = Anthropic::new(config(&provider, true)).expect("a client");
    let first = model.complete(&request(), &|_| {}).await.expect_err("overloaded");
    assert!(matches!(first, ModelError::Unavailable { status: 529, .. }) && first.retryable(), "{first}");
    let answer = model.complete(&request(), &|_| {}).await.expect("the next call works");
    assert_eq!(answer.message.tool_calls().count(), 1);
}

#[tokio::test]
async fn a_rate_limit_waits_and_a_billing_error_stops() {
    let limited = Reply::json(429, "anthropic/rate_limited.json").with_header("retry-after", "0");
    let provider = Provider::start(vec![limited, Reply::json(200, "anthropic/tool_use.json")]).await;
    let model = Anthropic::new(config(&provider, false)).expect("a client");
    complete(&model, &request(), &|_| {}, RetryPolicy::default(), 3).await.expect("an answer after the wait");
    assert_eq!(provider.received().len(), 2);

    let provider = Provider::start(vec![Reply::json(400, "anthropic/billing.json")]).await;
    let model = Anthropic::new(config(&provider, false)).expect("a client");
    let error = complete(&model, &request(), &|_| {}, RetryPolicy::default(), 3).await.expect_err("no credit");
    assert!(matches!(&error, ModelError::QuotaExhausted { message } if message.contains("credit balance")), "{error}");
    assert_eq!(provider.received().len(), 1, "never tried again");
}
