//! The slash-command menu: the built-ins and the tools Discord can name, registered once READY names the application and again when
//! the tools change.

use ferrobot::bot::{CommandSpec, OptionKind};
use serde_json::{Value, json};
use twilight_http::request::Request;
use twilight_http::routing::Route;
use twilight_model::id::Id;
use twilight_model::id::marker::ApplicationMarker;

use crate::Inner;

impl Inner {
    /// Registers the latest slash-command menu.
    pub(crate) async fn set_menu(&self, application: Id<ApplicationMarker>) {
        self.menu
            .send(|commands| self.send_menu(application, commands))
            .await;
    }

    /// Registers the slash commands: the built-ins (`/new`, `/undo`,
    /// `/help`, …, which `serve` puts first; `/cancel` with its task id),
    /// then the tools Discord can name, with typed options.
    async fn send_menu(&self, application: Id<ApplicationMarker>, specs: Vec<CommandSpec>) {
        let mut names: Vec<String> = Vec::new();
        let mut menu: Vec<Value> = Vec::new();
        for spec in &specs {
            if spec.builtin.is_some() && spec.options.is_empty() {
                names.push(spec.name.clone());
                menu.push(json!({"type": 1, "name": spec.name, "description": spec.description}));
                continue;
            }
            // A tool takes its arguments by their own names, so a name
            // Discord can't carry leaves the tool out of the picker (it
            // still works typed as `/name key=value`).
            let unusable = std::iter::once(&spec.name)
                .chain(spec.options.iter().map(|o| &o.name))
                .find(|name| !discord_name(name));
            if let Some(name) = unusable.or(names.contains(&spec.name).then_some(&spec.name)) {
                tracing::info!(tool = %spec.name, %name, "tool left out of the Discord commands: names there are 1-32 lowercase letters, digits, - and _, and unique");
                continue;
            }
            names.push(spec.name.clone());
            let options: Vec<Value> = spec
                .options
                .iter()
                .take(25)
                .map(|option| {
                    let kind = match option.kind {
                        OptionKind::Integer => 4,
                        OptionKind::Boolean => 5,
                        OptionKind::Number => 10,
                        _ => 3,
                    };
                    json!({
                        "type": kind,
                        "name": option.name,
                        "description": describe(&option.description, &option.name),
                        "required": option.required,
                    })
                })
                .collect();
            menu.push(json!({
                "type": 1,
                "name": spec.name,
                "description": describe(&spec.description, &spec.name),
                "options": options,
            }));
        }
        menu.truncate(100);
        let request = Request::builder(&Route::SetGlobalCommands {
            application_id: application.get(),
        })
        .json(&menu)
        .build();
        let published = match request {
            Ok(request) => self
                .call("set commands", || {
                    self.http.request::<Value>(request.clone())
                })
                .await
                .map(drop),
            Err(error) => Err(error),
        };
        if let Err(error) = published {
            tracing::warn!(error = %self.redact(&error), "could not register the slash commands");
        }
    }
}

/// Whether Discord accepts `name` for a command or option.
fn discord_name(name: &str) -> bool {
    (1..=32).contains(&name.chars().count())
        && name
            .chars()
            .all(|c| c.is_lowercase() || c.is_numeric() || c == '_' || c == '-')
}

/// A short description Discord accepts: 1-100 characters.
fn describe(description: &str, fallback: &str) -> String {
    let text = if description.trim().is_empty() {
        fallback
    } else {
        description
    };
    text.chars().take(100).collect()
}
