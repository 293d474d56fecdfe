//! The layered config: defaults, file, environment, flags.
// figment's `Jail` closures return its (large) error type.
#![allow(clippy::result_large_err)]

use ferrobot_app::{Config, ConfigError, ConfigSource};
use figment::Jail;

#[test]
fn file_environment_and_flags_layer_in_that_order() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "ferrobot.toml",
            r#"
                [llm]
                model = "from-file"
                base_url = "http://gpu-box:8000/v1"
                [agent]
                max_tool_rounds = 4
            "#,
        )?;
        jail.set_env("FERROBOT_LLM__MODEL", "from-env");
        jail.set_env("FERROBOT_BASE_URL", "ignored: not nested");
        jail.set_env("FERROBOT_LLM__API_KEY", "sk-secret");
        let loaded = Config::load(&ConfigSource::new()).map_err(|e| e.to_string())?;
        let config = &loaded.config;
        assert_eq!(config.llm.model, "from-env");
        assert_eq!(config.llm.base_url, "http://gpu-box:8000/v1");
        assert_eq!(config.agent.max_tool_rounds, 4);
        assert_eq!(
            config.llm.api_key.as_ref().map(|k| k.expose()),
            Some("sk-secret")
        );
        assert!(!format!("{config:?}").contains("sk-secret"));

        let explained = loaded.explain();
        let row = |key: &str| {
            explained
                .iter()
                .find(|(k, _, _)| k == key)
                .cloned()
                .unwrap()
        };
        assert!(
            row("llm.base_url").2.contains("ferrobot.toml"),
            "{:?}",
            row("llm.base_url")
        );
        assert!(
            row("llm.model").2.contains("environment"),
            "{:?}",
            row("llm.model")
        );
        assert_eq!(row("llm.api_key").1, "[redacted]");
        assert!(
            !format!("{explained:?}").contains("sk-secret"),
            "no secret in `config check`"
        );
        assert_eq!(row("agent.tool_timeout_secs").1, "60");

        let flagged =
            Config::load(&ConfigSource::new().model("from-flag")).map_err(|e| e.to_string())?;
        assert_eq!(flagged.config.llm.model, "from-flag");
        Ok(())
    });
}

#[test]
fn unknown_keys_and_bad_values_name_the_key_and_the_file() {
    Jail::expect_with(|jail| {
        jail.create_file("typo.toml", "[llm]\nmodle = \"qwen3:8b\"\n")?;
        let error = Config::load(&ConfigSource::new().file("typo.toml"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field: found `modle`"), "{error}");
        assert!(
            error.contains("`model`"),
            "the accepted keys are listed: {error}"
        );
        assert!(error.contains("typo.toml"), "{error}");

        jail.create_file("type.toml", "[agent]\nmax_tool_rounds = \"ten\"\n")?;
        let error = Config::load(&ConfigSource::new().file("type.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("max_tool_rounds") && error.contains("type.toml"),
            "{error}"
        );

        jail.create_file("provider.toml", "[llm]\nprovider = \"gpt\"\n")?;
        let error = Config::load(&ConfigSource::new().file("provider.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("unknown variant: found `gpt`")
                && error.contains("`openai`, `ollama`, `anthropic`, `gemini`, `responses`")
                && error.contains("llm.provider")
                && error.contains("provider.toml"),
            "{error}"
        );

        let error = Config::load(&ConfigSource::new().file("nowhere.toml")).unwrap_err();
        assert!(matches!(error, ConfigError::Missing { .. }));
        Ok(())
    });
}

#[test]
fn relative_paths_resolve_against_the_config_file() {
    Jail::expect_with(|jail| {
        jail.create_dir("conf")?;
        jail.create_file("conf/bot.toml", "[history]\npath = \"data/history.db\"\n")?;
        let loaded =
            Config::load(&ConfigSource::new().file("conf/bot.toml")).map_err(|e| e.to_string())?;
        let path = loaded.history_path();
        assert!(path.ends_with("conf/data/history.db"), "{}", path.display());
        assert!(path.is_absolute(), "{}", path.display());
        Ok(())
    });
}

#[test]
fn defaults_need_no_file() {
    let loaded = Config::load(&ConfigSource::defaults_only()).unwrap();
    assert_eq!(loaded.config.llm.base_url, "http://localhost:11434/v1");
    assert!(loaded.file.is_none());
    assert!(loaded.history_path().ends_with("history.db"));
}

#[test]
fn secrets_are_hidden_by_their_type_whatever_their_key() {
    Jail::expect_with(|jail| {
        jail.set_env("FERROBOT_TELEGRAM__TOKEN", "123:telegram-secret");
        jail.set_env("FERROBOT_DISCORD__TOKEN", "discord-secret");
        let loaded = Config::load(&ConfigSource::new()).map_err(|e| e.to_string())?;
        let explained = loaded.explain();
        for key in ["telegram.token", "discord.token"] {
            let row = explained.iter().find(|(k, _, _)| k == key).unwrap();
            assert_eq!(row.1, "[redacted]", "{row:?}");
            assert!(row.2.contains("environment"), "{row:?}");
        }
        let everything = format!("{explained:?} {:?}", loaded.config);
        assert!(!everything.contains("secret"), "{everything}");
        Ok(())
    });
}

/// A build without a dialect refuses a config naming it, and says which
/// feature to build with (`.ci/run` runs this with only `openai`).
#[cfg(not(feature = "anthropic"))]
#[test]
fn a_dialect_this_build_lacks_is_refused_naming_its_feature() {
    Jail::expect_with(|jail| {
        jail.create_file("claude.toml", "[llm]\nprovider = \"anthropic\"\n")?;
        let error = Config::load(&ConfigSource::new().file("claude.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("without the `anthropic` feature")
                && error.contains("--features anthropic"),
            "{error}"
        );
        Ok(())
    });
}

/// `[llm]`'s time-outs reach every dialect the bots can build.
#[cfg(all(
    feature = "openai",
    feature = "ollama",
    feature = "anthropic",
    feature = "gemini",
    feature = "responses"
))]
#[tokio::test]
async fn the_llm_section_sets_time_outs_for_every_dialect() {
    use futures_util::StreamExt;
    use std::time::Duration;
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_delay(Duration::from_secs(5)))
        .mount(&server)
        .await;
    let uri = server.uri();
    let dialects = ferrobot_app::Dialect::ALL.map(|dialect| {
        let uri = uri.clone();
        async move {
            let mut loaded = Config::load(&ConfigSource::defaults_only()).unwrap();
            loaded.config.llm.provider = dialect;
            loaded.config.llm.base_url = format!("{uri}/v1");
            loaded.config.llm.read_timeout_secs = 1;
            let provider = loaded.provider().unwrap();
            let messages = [ferrobot::Message::user("hi")];
            let first = provider
                .stream(ferrobot::provider::ChatRequest::new(&messages))
                .next()
                .await;
            // The server answers after 5 s; the error names the 1 s waited.
            let Some(Err(error)) = first else {
                panic!("{dialect:?}: {first:?}");
            };
            assert!(
                error.chain().contains("1s"),
                "{dialect:?}: {}",
                error.chain()
            );
        }
    });
    futures_util::future::join_all(dialects).await;
    Jail::expect_with(|jail| {
        jail.create_file("zero.toml", "[llm]\nread_timeout_secs = 0\n")?;
        let error = Config::load(&ConfigSource::new().file("zero.toml"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("`llm.read_timeout_secs` is 0"), "{error}");
        jail.create_file(
            "forever.toml",
            "[llm]\nconnect_timeout_secs = 999999999999\n",
        )?;
        let error = Config::load(&ConfigSource::new().file("forever.toml"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("from 1 to 86400"), "{error}");
        jail.create_file("budget.toml", "[agent]\nbudget_output_tokens = 0\n")?;
        let error = Config::load(&ConfigSource::new().file("budget.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("`agent.budget_output_tokens` is 0"),
            "{error}"
        );
        Ok(())
    });
}

#[test]
fn permission_rules_are_read_in_file_order_and_shown_by_config_check() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "ferrobot.toml",
            r#"
                [[permissions.rules]]
                tool = "*"
                permission = "ask"

                [[permissions.rules]]
                tool = "read_file"
                permission = "deny"
                arguments = { path = "~/.ssh/**" }
            "#,
        )?;
        let loaded = Config::load(&ConfigSource::new()).map_err(|e| e.to_string())?;
        let rules = loaded.policy();
        let shown: Vec<String> = rules.list().iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["ask *", r#"deny read_file path="~/.ssh/**""#]);
        assert!(loaded.rules_source().contains("ferrobot.toml"));
        let explained = loaded.explain();
        let row = explained
            .iter()
            .find(|(key, _, _)| key == "permissions.rules[2]")
            .unwrap();
        assert_eq!(row.1, r#"deny read_file path="~/.ssh/**""#);
        assert!(row.2.contains("ferrobot.toml"), "{row:?}");
        Ok(())
    });
}

#[test]
fn a_bad_permission_rule_is_named_by_its_number_and_key() {
    let cases = [
        (
            "tool = \"x\"\npermission = \"alow\"",
            r#"`permissions.rules[2].permission`: expected "allow", "ask" or "deny", got "alow""#,
        ),
        (
            "tool = \"x\"\npermission = \"deny\"\ncomand = \"rm *\"",
            "`permissions.rules[2].comand`: unknown key; a rule takes",
        ),
        (
            "permission = \"deny\"",
            "`permissions.rules[2].tool`: missing",
        ),
        (
            "tool = \"x\"\npermission = \"deny\"\narguments = { path = 3 }",
            "`permissions.rules[2].arguments.path`: expected a string",
        ),
        (
            "tool = \"\"\npermission = \"deny\"",
            "`permissions.rules[2].tool` is empty",
        ),
    ];
    for (second, expected) in cases {
        Jail::expect_with(|jail| {
            jail.create_file(
                "ferrobot.toml",
                &format!(
                    "[[permissions.rules]]\ntool = \"*\"\npermission = \"ask\"\n\n[[permissions.rules]]\n{second}\n"
                ),
            )?;
            let error = Config::load(&ConfigSource::new()).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
            assert!(error.contains("ferrobot.toml"), "{error}");
            Ok(())
        });
    }
    Jail::expect_with(|jail| {
        jail.create_file("ferrobot.toml", "[permissions]\nrule = []\n")?;
        let error = Config::load(&ConfigSource::new()).unwrap_err().to_string();
        assert!(error.contains("permissions.rule"), "{error}");
        Ok(())
    });
}

/// `agent.while_busy` picks what a message does while its chat's turn runs;
/// a mode it doesn't know is refused, naming the key and the modes.
#[test]
fn while_busy_names_the_mode_and_refuses_others() {
    Jail::expect_with(|jail| {
        let defaults = Config::load(&ConfigSource::defaults_only()).map_err(|e| e.to_string())?;
        assert_eq!(
            defaults.config.agent.while_busy,
            ferrobot_app::WhileBusyMode::Queue
        );
        jail.create_file("steer.toml", "[agent]\nwhile_busy = \"steer\"\n")?;
        let loaded =
            Config::load(&ConfigSource::new().file("steer.toml")).map_err(|e| e.to_string())?;
        assert_eq!(
            loaded.config.agent.while_busy,
            ferrobot_app::WhileBusyMode::Steer
        );
        let mode: ferrobot::agent::WhileBusy = loaded.config.agent.while_busy.into();
        assert_eq!(mode, ferrobot::agent::WhileBusy::Steer);

        jail.create_file("bad.toml", "[agent]\nwhile_busy = \"wait\"\n")?;
        let error = Config::load(&ConfigSource::new().file("bad.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("agent.while_busy")
                && error.contains("`queue`, `steer`, `interrupt`")
                && error.contains("bad.toml"),
            "{error}"
        );
        Ok(())
    });
}

#[test]
fn the_schedule_section_sets_the_time_zone_and_retries_and_names_mistakes() {
    Jail::expect_with(|jail| {
        let defaults = Config::load(&ConfigSource::defaults_only()).map_err(|e| e.to_string())?;
        assert_eq!(defaults.config.schedule.time_zone, None);
        assert_eq!(defaults.config.schedule.retry_minutes, [1, 5, 15]);
        jail.create_file(
            "ferrobot.toml",
            "[schedule]\ntime_zone = \"Europe/Paris\"\nretry_minutes = [2]\n",
        )?;
        let loaded = Config::load(&ConfigSource::new()).map_err(|e| e.to_string())?;
        assert_eq!(
            loaded.config.schedule.time_zone.as_deref(),
            Some("Europe/Paris")
        );
        let scheduler = loaded.scheduler().map_err(|e| e.to_string())?;
        assert_eq!(scheduler.time_zone_name(), "Europe/Paris");
        jail.create_file(
            "ferrobot.toml",
            "[schedule]\ntime_zone = \"Mars/Olympus\"\n",
        )?;
        let error = Config::load(&ConfigSource::new()).unwrap_err().to_string();
        assert!(
            error.contains("`schedule.time_zone`: unknown time zone `Mars/Olympus`: use an IANA name such as `Europe/Paris`"),
            "{error}"
        );
        jail.create_file("ferrobot.toml", "[schedule]\nretry_minutes = [1, 0]\n")?;
        let error = Config::load(&ConfigSource::new()).unwrap_err().to_string();
        assert!(
            error.contains("`schedule.retry_minutes` holds 0"),
            "{error}"
        );
        Ok(())
    });
}

#[test]
fn delegate_specialists_are_read_and_their_unknown_tools_named() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "ferrobot.toml",
            r#"
                [history]
                path = "history.db"
                [tools]
                state_file = "tool_state.json"
                file = "tools.toml"
                [delegate]
                max_running = 1
                [delegate.agents.researcher]
                description = "Looks things up."
                model = "research-model"
                tools = ["disk_usage", "web_search", "crystal_ball"]
            "#,
        )?;
        let loaded = Config::load(&ConfigSource::new()).map_err(|e| e.to_string())?;
        let delegate = &loaded.config.delegate;
        assert_eq!((delegate.max_running, delegate.max_waiting), (1, 8));
        let researcher = &delegate.agents["researcher"];
        assert_eq!(researcher.description, "Looks things up.");
        assert_eq!(researcher.model.as_deref(), Some("research-model"));
        assert_eq!(researcher.system_prompt, None);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let error = runtime
            .block_on(loaded.agent(
                |_: ferrobot::confirm::ConfirmRequest| async { false },
                |_: String, _: String| async {},
            ))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(
                "delegate.agents.researcher.tools: no tool named web_search, crystal_ball; \
                 the bot's tools: "
            ),
            "{error}"
        );
        assert!(error.contains("disk_usage"), "{error}");
        Ok(())
    });
}

#[test]
fn mcp_servers_are_read_with_their_secrets_hidden_and_tokens_from_the_environment() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "ferrobot.toml",
            r#"
                [mcp.servers.files]
                command = "npx"
                args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]
                env = { API_KEY = "env-secret" }
                trust = "all"
                timeout_secs = 5

                [mcp.servers.search]
                url = "https://mcp.example.com/mcp"
                headers = { "X-Api-Key" = "header-secret" }
                bearer_token_env = "SEARCH_TOKEN"

                [mcp.servers.off]
                command = "x"
                enabled = false
            "#,
        )?;
        jail.set_env("SEARCH_TOKEN", "token-secret");
        let loaded = Config::load(&ConfigSource::new()).map_err(|e| e.to_string())?;
        let files = &loaded.config.mcp.servers["files"];
        assert_eq!(files.trust, ferrobot::mcp::Trust::All);
        assert_eq!(files.env["API_KEY"].expose(), "env-secret");
        let explained = loaded.explain();
        let everything = format!("{explained:?} {:?}", loaded.config);
        assert!(!everything.contains("secret"), "{everything}");
        let servers = loaded.mcp_servers();
        let names: Vec<&str> = servers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["files", "search"], "disabled ones are left out");
        let search = servers[1].1.as_ref().unwrap();
        assert!(!format!("{search:?}").contains("secret"), "{search:?}");
        assert_eq!(search.describe(), "https://mcp.example.com/mcp");
        assert_eq!(
            servers[0].1.as_ref().unwrap().call_timeout(),
            std::time::Duration::from_secs(5)
        );
        Ok(())
    });
}

#[test]
fn a_bad_mcp_server_is_named_by_its_key() {
    for (toml, expected) in [
        (
            "[mcp.servers.x]\ncommand = \"a\"\nurl = \"http://b\"\n",
            "`mcp.servers.x` has both `command` and `url`",
        ),
        (
            "[mcp.servers.x]\ntrust = \"all\"\n",
            "`mcp.servers.x` needs `command`",
        ),
        (
            "[mcp.servers.x]\nurl = \"ftp://b\"\n",
            "`mcp.servers.x.url` is `ftp://b`",
        ),
        (
            "[mcp.servers.\"my files\"]\ncommand = \"a\"\n",
            "`mcp.servers.my files`: the MCP server name \"my files\" can't prefix tool names",
        ),
        (
            "[mcp.servers.x]\ncommand = \"a\"\nbearer_token_env = \"T\"\n",
            "`mcp.servers.x`: `headers` and `bearer_token_env` are for HTTP servers",
        ),
        (
            "[mcp.servers.x]\ncommand = \"a\"\ntrust = \"some\"\n",
            "unknown variant: found `some`, expected",
        ),
        (
            "[mcp.servers.x]\ncommand = \"a\"\ntimeout_secs = 0\n",
            "`mcp.servers.x.timeout_secs` is 0",
        ),
    ] {
        Jail::expect_with(|jail| {
            jail.create_file("ferrobot.toml", toml)?;
            let error = Config::load(&ConfigSource::new()).unwrap_err().to_string();
            assert!(error.contains(expected), "{toml}: {error}");
            Ok(())
        });
    }
}

#[test]
fn a_history_database_is_shown_without_its_password_and_not_beside_a_file() {
    Jail::expect_with(|jail| {
        jail.set_env(
            "FERROBOT_HISTORY__URL",
            "postgres://bot:hunter2@db.internal/ferrobot?sslmode=require",
        );
        let loaded = Config::load(&ConfigSource::new());
        if !cfg!(feature = "postgres") {
            let error = loaded.unwrap_err().to_string();
            assert!(error.contains("`postgres` feature"), "{error}");
            return Ok(());
        }
        let loaded = loaded.map_err(|e| e.to_string())?;
        let explained = loaded.explain();
        let url = explained
            .iter()
            .find(|(k, _, _)| k == "history.url")
            .unwrap();
        assert_eq!(
            url.1,
            "postgres://bot:***@db.internal/ferrobot?sslmode=require"
        );
        assert!(url.2.contains("environment"), "{url:?}");
        assert_eq!(
            loaded.history_place(),
            "history database: postgres://bot:***@db.internal/ferrobot?sslmode=require"
        );
        assert!(!format!("{explained:?}{:?}", loaded.config).contains("hunter2"));

        jail.create_file("ferrobot.toml", "[history]\npath = \"h.db\"\n")?;
        let error = Config::load(&ConfigSource::new()).unwrap_err().to_string();
        assert!(
            error.contains("`history.path` and `history.url`"),
            "{error}"
        );
        Ok(())
    });
}
