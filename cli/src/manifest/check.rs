//! What `agentry check` finds beyond the file's shape: agent types the binary does not register, skills
//! nothing provides, models `[models]` does not define, permission rules that match no action, start skills
//! that require each other in a circle, MCP servers that are neither a command nor a URL, and values of the
//! right type that are still wrong. Each layer is checked with what every layer defines in view.

use super::diagnostic::{Code, ManifestError, closest};
use super::{Layer, Loaded};
use crate::registry::Registry;
use agentry::pattern::Pattern;
use std::collections::{BTreeMap, BTreeSet};
use toml::Spanned;

/// Every mistake in every layer.
pub fn check(loaded: &Loaded, registry: &Registry) -> Vec<ManifestError> {
    let world = World::of(loaded, registry);
    loaded.layers.iter().flat_map(|layer| check_layer(layer, &world)).collect()
}

/// What the layers and the registry define, together.
struct World<'a> {
    registry: &'a Registry,
    /// Skill ids: the catalog's, `mcp.<server>`, `llm.<model>`.
    skills: BTreeSet<String>,
    models: BTreeSet<String>,
    /// Known action ids (the catalog's skills' actions and each model's `llm.<name>.chat`).
    actions: Vec<String>,
    /// MCP skill prefixes (`mcp.<server>.`): their tools are known only once connected.
    open_prefixes: Vec<String>,
}

impl<'a> World<'a> {
    fn of(loaded: &Loaded, registry: &'a Registry) -> Self {
        let mut skills: BTreeSet<String> = registry.skill_ids().map(str::to_owned).collect();
        let mut actions: Vec<String> =
            registry.skills.values().flat_map(|s| s.actions().iter().map(|a| a.spec().id.to_string())).collect();
        let mut models = BTreeSet::new();
        let mut open_prefixes = Vec::new();
        for layer in &loaded.layers {
            for name in layer.manifest.mcp_servers.keys() {
                skills.insert(format!("mcp.{name}"));
                open_prefixes.push(format!("mcp.{name}"));
            }
            for name in layer.manifest.models.keys() {
                skills.insert(format!("llm.{name}"));
                actions.push(format!("llm.{name}.chat"));
                models.insert(name.clone());
            }
        }
        Self { registry, skills, models, actions, open_prefixes }
    }

    /// Whether some known action, or some tool of an MCP server, could match the pattern.
    fn could_match(&self, pattern: &Pattern) -> bool {
        if self.actions.iter().any(|a| pattern.matches(a)) {
            return true;
        }
        // A server's tools are not known before it runs: a pattern reaching under `mcp.<server>.` may match.
        self.open_prefixes.iter().any(|prefix| {
            let text = pattern.as_str();
            text.starts_with(&format!("{prefix}.")) || pattern.matches(&format!("{prefix}.any_tool")) || text == "**"
        })
    }
}

fn check_layer(layer: &Layer, world: &World<'_>) -> Vec<ManifestError> {
    let source = &layer.source;
    let m = &layer.manifest;
    let mut errors = super::policy::check(source, m);
    for (id, agent) in &m.agents {
        if let Err(err) = agentry::id::AgentId::new(id.as_str()) {
            errors.push(
                ManifestError::at(Code::BadValue, source, agent.kind.span(), format!("agent id `{id}`: {err}"))
                    .label("in this agent"),
            );
        }
        let kind = agent.kind.get_ref();
        if !world.registry.agents.contains_key(kind) {
            let known: Vec<&str> = world.registry.agent_types().collect();
            let mut error = ManifestError::at(
                Code::UnknownAgentType,
                source,
                agent.kind.span(),
                format!("agent `{id}` has unknown type `{kind}`"),
            )
            .label("no such agent type");
            error = match closest(kind, known.iter().copied()) {
                Some(best) => {
                    error.help(format!("did you mean `{best}`? (types this binary registers: {})", known.join(", ")))
                }
                None => error.help(format!(
                    "types this binary registers: {}; a binary of your own adds its types with `agentry_cli::run_with`",
                    known.join(", ")
                )),
            };
            errors.push(error);
        }
        for entry in &agent.skills {
            let name = Spanned::new(entry.span(), entry.get_ref().name().to_owned());
            if !world.skills.contains(name.get_ref()) {
                errors.push(unknown_skill(source, &name, world));
            }
        }
        match (&agent.model, kind.as_str()) {
            (Some(model), _) if !world.models.contains(model.get_ref()) => {
                let mut error = ManifestError::at(
                    Code::UnknownModel,
                    source,
                    model.span(),
                    format!("agent `{id}` names model `{}`, which `[models]` does not define", model.get_ref()),
                )
                .label("no such model");
                if let Some(best) = closest(model.get_ref(), world.models.iter().map(String::as_str)) {
                    error = error.help(format!("did you mean `{best}`?"));
                } else {
                    error = error.help("define it under `[models.<name>]` with `provider` and `model`");
                }
                errors.push(error);
            }
            (None, "llm") => errors.push(
                ManifestError::at(
                    Code::UnknownModel,
                    source,
                    agent.kind.span(),
                    format!("agent `{id}` is an `llm` agent and names no `model`"),
                )
                .label("an LLM agent needs a model")
                .help("add `model = \"<name>\"`, a key of `[models]`"),
            ),
            _ => {}
        }
        if let Some(cycle) = cycle(agent, world) {
            let first =
                agent.skills.iter().find(|e| e.get_ref().name() == cycle[0]).map_or(agent.kind.span(), Spanned::span);
            errors.push(
                ManifestError::at(
                    Code::SkillCycle,
                    source,
                    first,
                    format!("the start skills of agent `{id}` require each other in a circle: {}", cycle.join(" → ")),
                )
                .label("this skill is part of the circle")
                .help("a skill can be mounted only after the skills it requires; break the circle"),
            );
        }
    }
    let mut rules: Vec<(&str, &Spanned<String>)> = Vec::new();
    let mut all_permissions = vec![&m.permissions];
    all_permissions.extend(m.agents.values().map(|a| &a.permissions));
    for p in all_permissions {
        for (list, patterns) in [("allow", &p.allow), ("ask", &p.ask), ("deny", &p.deny)] {
            rules.extend(patterns.iter().map(|r| (list, r)));
        }
    }
    for (list, rule) in rules {
        let Ok(pattern) = Pattern::new(rule.get_ref().as_str()) else { continue };
        if !world.could_match(&pattern) {
            let mut error = ManifestError::at(
                Code::RuleMatchesNothing,
                source,
                rule.span(),
                format!("the `{list}` rule `{}` matches no action of any skill", rule.get_ref()),
            )
            .label("matches nothing");
            let best = closest(rule.get_ref(), world.actions.iter().map(String::as_str));
            error = match best {
                Some(best) => {
                    error.help(format!("did you mean `{best}`? (`*` stands for one segment, `**` for any number)"))
                }
                None => error
                    .help("`*` stands for one segment of an action id, `**` for any number: `fs.*`, `mcp.github.**`"),
            };
            errors.push(error);
        }
    }
    if let Some(idle) = &m.runtime.hibernate_after
        && let Err((span, message)) = super::parse_duration(idle)
    {
        errors.push(ManifestError::at(Code::BadValue, source, span, message));
    }
    for (name, server) in &m.mcp_servers {
        let texts = server.args.iter().chain(server.env.values()).chain(server.http_headers.values());
        let spanned = server.command.iter().chain(server.url.iter());
        for text in texts.map(String::as_str).chain(spanned.clone().map(|s| s.get_ref().as_str())) {
            if let Err(err) = super::mcp_json::check_references(text) {
                let span = spanned.clone().next().map_or(0..0, Spanned::span);
                errors.push(ManifestError::at(Code::McpServer, source, span, format!("MCP server `{name}`: {err}")));
            }
        }
        if server.command.is_some() == server.url.is_some() {
            let span = server.command.as_ref().or(server.url.as_ref()).map_or(0..0, Spanned::span);
            errors.push(
                ManifestError::at(
                    Code::McpServer,
                    source,
                    span,
                    format!("MCP server `{name}` must have exactly one of `command` (stdio) and `url` (HTTP)"),
                )
                .label("here"),
            );
        }
    }
    errors
}

fn unknown_skill(source: &super::diagnostic::Source, name: &Spanned<String>, world: &World<'_>) -> ManifestError {
    let error =
        ManifestError::at(Code::UnknownSkill, source, name.span(), format!("unknown skill `{}`", name.get_ref()))
            .label("no such skill");
    match closest(name.get_ref(), world.skills.iter().map(String::as_str)) {
        Some(best) => error.help(format!("did you mean `{best}`?")),
        None => error.help(format!(
            "skills here: {}; MCP servers are `mcp.<name>`, models `llm.<name>`",
            world.skills.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// A circle among an agent's start skills, through the skills' own `requires`, if there is one.
fn cycle(agent: &super::AgentSection, world: &World<'_>) -> Option<Vec<String>> {
    let edges: BTreeMap<String, Vec<String>> = agent
        .skills
        .iter()
        .filter_map(|e| world.registry.skills.get(e.get_ref().name()))
        .map(|skill| (skill.id().to_string(), skill.requires().iter().map(ToString::to_string).collect()))
        .collect();
    fn visit(
        node: &str,
        edges: &BTreeMap<String, Vec<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_owned());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, edges, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|start| visit(start, &edges, &mut Vec::new(), &mut done))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentry::skill::Skill;

    fn loaded(text: &str) -> (tempfile::TempDir, Loaded) {
        let dir = tempfile::tempdir().expect("a folder");
        let path = dir.path().join("agentry.toml");
        std::fs::write(&path, text).expect("written");
        let loaded = crate::manifest::load(&[path]).expect("it parses");
        (dir, loaded)
    }

    #[test]
    fn start_skills_that_require_each_other_in_a_circle_are_named_in_order() {
        let registry = Registry::standard()
            .skill(Skill::builder("ledger", "1.0.0").requires("audit").build().expect("builds"))
            .skill(Skill::builder("audit", "1.0.0").requires("ledger").build().expect("builds"));
        let (_dir, loaded) = loaded("[agents.books]\ntype = \"tools\"\nskills = [\"ledger\", \"audit\"]\n");
        let errors = check(&loaded, &registry);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].code, Code::SkillCycle);
        assert!(errors[0].message.contains("audit → ledger → audit"), "{}", errors[0].message);
        let shown = errors[0].render();
        assert!(shown.contains("agentry.toml:3:21") && shown.contains("skills = [\"ledger\", \"audit\"]"), "{shown}");
        // Without the circle, nothing is wrong.
        let registry = Registry::standard()
            .skill(Skill::builder("ledger", "1.0.0").requires("audit").build().expect("builds"))
            .skill(Skill::builder("audit", "1.0.0").build().expect("builds"));
        assert!(check(&loaded, &registry).is_empty());
    }

    #[test]
    fn rules_under_an_mcp_server_are_not_called_empty_before_it_runs() {
        let text = "[mcp_servers.github]\ncommand = \"gh-mcp\"\n\n[permissions]\nask = [\"mcp.github.*\", \"mcp.github.create_issue\"]\ndeny = [\"mcp.gitlab.*\"]\n";
        let (_dir, loaded) = loaded(text);
        let errors = check(&loaded, &Registry::standard());
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].message.contains("mcp.gitlab.*"));
    }
}
