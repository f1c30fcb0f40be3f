//! Events as a person reads them (one line each), or as JSON lines for scripts.

use agentry::events::{Event, EventKind};

/// One event as a line: JSON, or readable text.
pub fn event_line(event: &Event, json: bool) -> Option<String> {
    if json {
        return serde_json::to_string(event).ok();
    }
    let at = event.at.format("%H:%M:%S%.3f");
    let agent = event.agent.as_str();
    let run = event.run.map(|r| format!(" [run {r}]")).unwrap_or_default();
    let what = match &event.kind {
        EventKind::AgentStarted => "started".to_owned(),
        EventKind::AgentStopped { .. } => "stopped".to_owned(),
        EventKind::AgentHibernated => "fell asleep".to_owned(),
        EventKind::AgentThawed => "woke up".to_owned(),
        EventKind::AgentRolledBack { reason } => format!("rolled back to the journal: {reason}"),
        EventKind::SkillMounted { skill, .. } => format!("mounted {skill}"),
        EventKind::SkillUnmounted { skill, .. } => format!("unmounted {skill}"),
        EventKind::SkillRefreshed { skill, added, removed } => {
            let list = |ids: &[agentry::id::ActionId]| ids.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(", ");
            format!("refreshed {skill}: added [{}], removed [{}]", list(added), list(removed))
        }
        EventKind::ActionStarted { action, attempt } if *attempt > 1 => format!("{action} started (attempt {attempt})"),
        EventKind::ActionStarted { action, .. } => format!("{action} started"),
        EventKind::ActionCompleted { action, .. } => format!("{action} completed"),
        EventKind::ActionFailed { action, class, message } => format!("{action} failed ({class:?}): {message}"),
        EventKind::ActionBlocked { action, reason } => format!("{action} refused: {reason}"),
        EventKind::ActionRetried { action, attempt, class, .. } => {
            format!("{action} retrying after attempt {attempt} ({class:?})")
        }
        EventKind::ActionNote { action, topic, data } if topic == agentry::action::PROGRESS => {
            let percent = (data["fraction"].as_f64().unwrap_or(0.0) * 100.0).round();
            let message = data["message"].as_str().map(|m| format!(": {m}")).unwrap_or_default();
            format!("{action} {percent}%{message}")
        }
        EventKind::ActionNote { action, topic, data } => format!("{action} {topic}: {data}"),
        EventKind::ActionOutput { text, .. } => format!("… {text}"),
        EventKind::ApprovalAsked { action, risk, .. } => format!("{action} waits for approval (risk {risk:?})"),
        EventKind::ApprovalGiven { action, approved: true } => format!("{action} approved"),
        EventKind::ApprovalGiven { action, approved: false } => format!("{action} denied"),
        EventKind::ApprovalExpired { action } => format!("{action}: approval expired"),
        EventKind::JobEnded { job, status } => format!("job {job} ended: {status:?}"),
        // Queued runs and the rest are noise in a terminal; `--json` has everything.
        _ => return None,
    };
    Some(format!("{at} {agent:<12} {}{run}", escape(&what)))
}

/// Which progress notes a terminal shows, so a run that reports often does not flood it: a run's first, each
/// that moves it on by a tenth or more or says something new, and its last (100%). Every other event passes.
#[derive(Default)]
pub struct ProgressShown(std::collections::HashMap<uuid::Uuid, (u8, Option<String>)>);

impl ProgressShown {
    /// Whether to show `event`.
    pub fn admit(&mut self, event: &Event) -> bool {
        let Some(run) = event.run else { return true };
        match &event.kind {
            EventKind::ActionNote { topic, data, .. } if topic == agentry::action::PROGRESS => {
                let fraction = data["fraction"].as_f64().unwrap_or(0.0).clamp(0.0, 1.0);
                let tenths = (fraction * 10.0).floor() as u8;
                let message = data["message"].as_str().map(str::to_owned);
                match self.0.get(&run) {
                    Some((shown, said)) if *shown == tenths && *said == message => false,
                    _ => {
                        self.0.insert(run, (tenths, message));
                        true
                    }
                }
            }
            EventKind::ActionCompleted { .. } | EventKind::ActionFailed { .. } | EventKind::ActionBlocked { .. } => {
                self.0.remove(&run);
                true
            }
            _ => true,
        }
    }
}

/// Text as the terminal may show it: what a tool, a model or a peer wrote reaches the terminal as text, never
/// as control sequences that could move the cursor or fake a prompt, nor as invisible characters that reorder
/// or hide text (zero-width, bidirectional marks and overrides, tag characters, soft hyphens, byte-order mark):
/// those are escaped as `\u{..}`.
pub(crate) fn escape(text: &str) -> String {
    escaped(text, |_| false)
}

/// [`escape`], keeping line breaks and tabs as they are: for text shown as text (a model's answer, a state).
pub(crate) fn escape_lines(text: &str) -> String {
    escaped(text, |c| c == '\n' || c == '\t')
}

fn escaped(text: &str, kept: impl Fn(char) -> bool) -> String {
    let invisible = |c: char| {
        matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}')
            || matches!(c, '\u{e0000}'..='\u{e007f}' | '\u{061c}' | '\u{00ad}' | '\u{feff}')
    };
    let hidden = |c: char| !kept(c) && (c.is_control() || invisible(c));
    text.chars().flat_map(|c| if hidden(c) { c.escape_default().collect::<Vec<_>>() } else { vec![c] }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentry::events::{Event, EventKind};

    #[test]
    fn control_characters_from_a_tool_are_shown_escaped() {
        let event = Event {
            at: chrono::Utc::now(),
            agent: agentry::id::AgentId::new("a").expect("an id"),
            run: None,
            correlation: None,
            kind: EventKind::ActionOutput {
                action: "mcp.x.y".parse().expect("an id"),
                text: "hi\x1b[2K\rapprove? ".into(),
            },
        };
        let line = event_line(&event, false).expect("shown");
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(line.contains("\\u{1b}[2K\\r"), "{line}");
    }

    #[test]
    fn invisible_characters_that_hide_or_reorder_text_are_shown_escaped() {
        for hidden in ['\u{202e}', '\u{2066}', '\u{200b}', '\u{2061}', '\u{e0041}', '\u{061c}', '\u{00ad}', '\u{feff}']
        {
            let text = format!("ok{hidden}go");
            assert_eq!(escape(&text), format!("ok{}go", hidden.escape_default()), "{hidden:?}");
        }
        assert_eq!(escape_lines("a\nb\tc\u{1b}"), "a\nb\tc\\u{1b}", "lines and tabs kept, the rest escaped");
        assert_eq!(escape("a\nb"), "a\\nb");
    }
}
