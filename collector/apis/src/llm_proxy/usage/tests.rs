//! Usage read from payloads shaped as the providers send them, whole and streamed, with streams
//! cut at every possible byte boundary.

use super::*;

const CHAT_BODY: &str = r#"{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion","created":1741570283,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"The image shows a wooden boardwalk.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1117,"completion_tokens":46,"total_tokens":1163,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_fc9f1d7035"}"#;

/// A streamed chat completion with `include_usage`: every chunk has `"usage":null` and a last
/// chunk with no choices carries the totals. Lines end in `\n\n`, as OpenAI sends them.
const CHAT_STREAM: &str = concat!(
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Héllo\"},\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":{\"prompt_tokens\":19,\"completion_tokens\":10,\"total_tokens\":29,\"prompt_tokens_details\":{\"cached_tokens\":3}}}\n\n",
    "data: [DONE]\n\n",
);

/// A streamed Responses API call: typed events, usage in `response.completed`.
const RESPONSES_STREAM: &str = concat!(
    "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"usage\":null}}\n\n",
    "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\"}\n\n",
    "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":9,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"usage\":{\"input_tokens\":37,\"input_tokens_details\":{\"cached_tokens\":5},\"output_tokens\":11,\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":48}}}\n\n",
);

/// A streamed Anthropic message, with CRLF line ends: `message_start` has the input side,
/// `message_delta` the running output total.
const MESSAGES_STREAM: &str = concat!(
    "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"stop_reason\":null,\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":2000,\"output_tokens\":1}}}\r\n\r\n",
    "event: content_block_start\r\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\r\n\r\n",
    "event: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\n",
    "event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello!\"}}\r\n\r\n",
    "event: message_delta\r\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\r\n\r\n",
    "event: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n",
);

fn stream_usage(api: Api, chunks: &[&[u8]]) -> (Option<Usage>, Vec<Event>) {
    let mut split = SseSplitter::default();
    let mut usage = StreamUsage::new(api);
    let mut events = Vec::new();
    for chunk in chunks {
        for e in split.feed(chunk) {
            usage.event(&e.data);
            events.push(e);
        }
    }
    (usage.usage(), events)
}

/// Every way of cutting `stream` in three, fed chunk by chunk, gives the same usage and events
/// (whose raw bytes put back together are the stream).
fn check_all_cuts(api: Api, stream: &str, want: Usage, events: usize) {
    let bytes = stream.as_bytes();
    let (whole, whole_events) = stream_usage(api, &[bytes]);
    assert_eq!(whole, Some(want), "whole stream");
    assert_eq!(whole_events.len(), events);
    let step = (bytes.len() / 97).max(1);
    for i in 0..bytes.len() {
        for j in (i..bytes.len()).step_by(step) {
            let (a, rest) = bytes.split_at(i);
            let (b, c) = rest.split_at(j - i);
            let (got, got_events) = stream_usage(api, &[a, b, c]);
            assert_eq!(got, Some(want), "cut at {i} and {j}");
            assert_eq!(got_events, whole_events, "cut at {i} and {j}");
        }
    }
    let raw: Vec<u8> = whole_events.iter().flat_map(|e| e.raw.clone()).collect();
    assert_eq!(raw, bytes, "the events' raw bytes are the stream");
}

#[test]
fn paths_name_their_api() {
    assert_eq!(Api::of_path("chat/completions"), Api::ChatCompletions);
    assert_eq!(Api::of_path("completions"), Api::Completions);
    assert_eq!(Api::of_path("responses"), Api::Responses);
    assert_eq!(Api::of_path("messages"), Api::AnthropicMessages);
    assert_eq!(Api::of_path("embeddings"), Api::Embeddings);
    assert_eq!(Api::of_path("models"), Api::Other);
    assert_eq!(Api::of_path("responses/resp_1"), Api::Other);
    assert_eq!(Api::of_path("messages/count_tokens"), Api::Other);
    assert!(Api::AnthropicMessages.is_generation());
    assert!(!Api::Embeddings.is_generation());
    assert!(Api::Embeddings.is_metered());
}

#[test]
fn chat_completion_body_usage_with_cached_tokens() {
    let u = from_body(Api::ChatCompletions, CHAT_BODY.as_bytes());
    assert_eq!(
        u,
        Some(Usage {
            input: 1117,
            output: 46,
            cached_input: 1024
        })
    );
}

#[test]
fn embeddings_and_completions_bodies() {
    let emb = r#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.0023,-0.0093]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}"#;
    assert_eq!(
        from_body(Api::Embeddings, emb.as_bytes()),
        Some(Usage {
            input: 8,
            output: 0,
            cached_input: 0
        })
    );
    let cmpl = r#"{"id":"cmpl-1","object":"text_completion","choices":[{"text":"\n\nThis is","index":0,"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}"#;
    assert_eq!(
        from_body(Api::Completions, cmpl.as_bytes()),
        Some(Usage {
            input: 5,
            output: 7,
            cached_input: 0
        })
    );
}

#[test]
fn responses_body_usage() {
    let body = r#"{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"Hi"}]}],"usage":{"input_tokens":328,"input_tokens_details":{"cached_tokens":128},"output_tokens":52,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":380}}"#;
    assert_eq!(
        from_body(Api::Responses, body.as_bytes()),
        Some(Usage {
            input: 328,
            output: 52,
            cached_input: 128
        })
    );
}

#[test]
fn anthropic_body_counts_cache_reads_and_writes_as_input() {
    let body = r#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Hi"}],"model":"claude-sonnet-4-5","stop_reason":"end_turn","usage":{"input_tokens":12,"cache_creation_input_tokens":30,"cache_read_input_tokens":400,"output_tokens":6}}"#;
    assert_eq!(
        from_body(Api::AnthropicMessages, body.as_bytes()),
        Some(Usage {
            input: 442,
            output: 6,
            cached_input: 400
        })
    );
}

#[test]
fn bodies_without_usage_or_not_json_report_none() {
    assert_eq!(from_body(Api::ChatCompletions, b"{\"choices\":[]}"), None);
    assert_eq!(from_body(Api::ChatCompletions, b"{\"usage\":null}"), None);
    assert_eq!(from_body(Api::ChatCompletions, b"not json"), None);
    assert_eq!(from_body(Api::Other, CHAT_BODY.as_bytes()), None);
    let error = r#"{"error":{"message":"bad","type":"invalid_request_error"}}"#;
    assert_eq!(from_body(Api::Responses, error.as_bytes()), None);
}

#[test]
fn chat_stream_usage_at_every_chunk_boundary() {
    let want = Usage {
        input: 19,
        output: 10,
        cached_input: 3,
    };
    check_all_cuts(Api::ChatCompletions, CHAT_STREAM, want, 5);
}

#[test]
fn responses_stream_usage_at_every_chunk_boundary() {
    let want = Usage {
        input: 37,
        output: 11,
        cached_input: 5,
    };
    check_all_cuts(Api::Responses, RESPONSES_STREAM, want, 3);
}

#[test]
fn anthropic_stream_usage_at_every_chunk_boundary() {
    let want = Usage {
        input: 2125,
        output: 15,
        cached_input: 2000,
    };
    check_all_cuts(Api::AnthropicMessages, MESSAGES_STREAM, want, 6);
}

#[test]
fn a_running_total_in_every_chunk_keeps_the_last() {
    let stream = concat!(
        "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1}}\n\n",
        "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}\n\n",
        "data: [DONE]\n\n",
    );
    let (u, _) = stream_usage(Api::ChatCompletions, &[stream.as_bytes()]);
    assert_eq!(
        u,
        Some(Usage {
            input: 9,
            output: 2,
            cached_input: 0
        })
    );
}

#[test]
fn a_stream_cut_before_its_end_reports_what_it_had() {
    // An Anthropic stream stopped after message_start still knows its input.
    let cut = MESSAGES_STREAM.find("event: content_block_start").unwrap();
    let (u, _) = stream_usage(
        Api::AnthropicMessages,
        &[&MESSAGES_STREAM.as_bytes()[..cut]],
    );
    assert_eq!(
        u,
        Some(Usage {
            input: 2125,
            output: 1,
            cached_input: 2000
        })
    );
    // A chat stream without its usage chunk reports none.
    let cut = CHAT_STREAM.find("data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[]").unwrap();
    let (u, _) = stream_usage(Api::ChatCompletions, &[&CHAT_STREAM.as_bytes()[..cut]]);
    assert_eq!(u, None);
}

#[test]
fn responses_usage_only_from_terminal_events() {
    // An in-progress event's usage (some servers fill it) is not the final count.
    let stream = concat!(
        "data: {\"type\":\"response.in_progress\",\"response\":{\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n",
        "data: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"usage\":{\"input_tokens\":40,\"output_tokens\":4096}}}\n\n",
    );
    let (u, _) = stream_usage(Api::Responses, &[stream.as_bytes()]);
    assert_eq!(
        u,
        Some(Usage {
            input: 40,
            output: 4096,
            cached_input: 0
        })
    );
}

#[test]
fn multi_line_data_and_comments() {
    let mut s = SseSplitter::default();
    let events = s.feed(b": keep-alive\n\ndata: {\"a\":\ndata: 1}\nid: 7\n\n");
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].data, "");
    assert_eq!(events[1].data, "{\"a\":\n1}");
    assert!(s.feed(b"data: partial").is_empty());
    assert_eq!(s.rest(), b"data: partial");
}

#[test]
fn the_usage_only_chunk_is_recognised() {
    let last = r#"{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
    assert!(is_usage_only_chunk(last));
    let content = r#"{"id":"c","choices":[{"index":0,"delta":{"content":"x"}}],"usage":null}"#;
    assert!(!is_usage_only_chunk(content));
    assert!(!is_usage_only_chunk(r#"{"choices":[],"usage":null}"#));
    assert!(!is_usage_only_chunk("[DONE]"));
}

#[test]
fn include_usage_is_added_only_to_streams_that_lack_it() {
    let added = with_stream_usage(
        Api::ChatCompletions,
        br#"{"model":"m","stream":true,"messages":[]}"#,
    )
    .expect("a streamed request without usage is changed");
    let v: Value = serde_json::from_slice(&added).unwrap();
    assert_eq!(v["stream_options"]["include_usage"], true);
    assert_eq!(v["model"], "m");

    let kept = with_stream_usage(
        Api::ChatCompletions,
        br#"{"stream":true,"stream_options":{"include_obfuscation":false}}"#,
    )
    .unwrap();
    let v: Value = serde_json::from_slice(&kept).unwrap();
    assert_eq!(v["stream_options"]["include_obfuscation"], false);
    assert_eq!(v["stream_options"]["include_usage"], true);

    let unchanged: [&[u8]; 5] = [
        br#"{"stream":true,"stream_options":{"include_usage":true}}"#,
        br#"{"stream":false}"#,
        br#"{"messages":[]}"#,
        br#"{"stream":true,"stream_options":null}"#,
        b"not json",
    ];
    for body in unchanged {
        assert_eq!(with_stream_usage(Api::ChatCompletions, body), None);
    }
    assert_eq!(
        with_stream_usage(Api::Responses, br#"{"stream":true}"#),
        None
    );
}
