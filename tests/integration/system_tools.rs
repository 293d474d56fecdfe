//! The batteries-included system tools, reading this machine.

use ferrobot::tool::{Tool, ToolContext};
use serde_json::{Value, json};

async fn call(tool: &dyn Tool, arguments: Value) -> Result<Value, String> {
    tool.call(arguments, ToolContext::for_test("t"))
        .await
        .map(|out| serde_json::from_str(&out.text).unwrap_or(Value::String(out.text)))
        .map_err(|e| e.message().to_owned())
}

#[tokio::test]
async fn every_tool_answers_with_a_reading_or_a_reason() {
    let tools = ferrobot::tools::system();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "disk_usage",
            "memory",
            "cpu_load",
            "temperatures",
            "uptime",
            "top_processes",
            "network_interfaces",
            "os_info"
        ]
    );
    for tool in &tools {
        assert!(!tool.spec().description.is_empty());
        match call(tool.as_ref(), json!({})).await {
            Ok(reading) => assert!(!reading.is_null(), "{}", tool.name()),
            // A machine may hide a reading; the model gets a sentence saying so.
            Err(reason) => assert!(
                reason.contains("on this machine") || reason.contains("visible here"),
                "{}: {reason}",
                tool.name()
            ),
        }
    }
}

#[tokio::test]
async fn readings_have_the_promised_fields() {
    let memory = call(&ferrobot::tools::memory, json!({})).await.unwrap();
    assert!(
        memory["total"].as_str().unwrap().ends_with("iB"),
        "{memory}"
    );
    assert!(memory["used_percent"].as_f64().unwrap() <= 100.0);

    let cpu = call(&ferrobot::tools::cpu_load, json!({})).await.unwrap();
    assert!(cpu["cpus"].as_u64().unwrap() >= 1, "{cpu}");

    let processes = call(
        &ferrobot::tools::top_processes,
        json!({"by": "memory", "limit": 3}),
    )
    .await
    .unwrap();
    let processes = processes.as_array().unwrap();
    assert!(
        !processes.is_empty() && processes.len() <= 3,
        "{processes:?}"
    );
    assert!(processes[0]["pid"].as_u64().is_some());

    let os = call(&ferrobot::tools::os_info, json!({})).await.unwrap();
    assert_eq!(os["architecture"], std::env::consts::ARCH);

    let uptime = call(&ferrobot::tools::uptime, json!({})).await.unwrap();
    assert!(uptime.as_str().unwrap().starts_with("up "), "{uptime}");

    match call(&ferrobot::tools::disk_usage, json!({"path": "/"})).await {
        Ok(disks) => {
            let disks = disks.as_array().unwrap();
            assert_eq!(disks.len(), 1, "the filesystem holding / alone: {disks:?}");
            assert!(disks[0]["available"].is_string());
        }
        Err(reason) => assert!(
            reason.contains("visible here") || reason.contains("on this machine"),
            "{reason}"
        ),
    }
    let bad = call(&ferrobot::tools::top_processes, json!({"by": "disk"}))
        .await
        .unwrap_err();
    assert!(
        bad.contains("unknown variant `disk`, expected `cpu` or `memory`"),
        "{bad}"
    );
}

mod command_tools {
    use std::time::Duration;

    use ferrobot::tool::{Tool, ToolContext};
    use ferrobot::tools::{CommandTool, ParamKind};
    use serde_json::json;

    fn echo() -> CommandTool {
        CommandTool::new("echo_text", "Echo a text.", ["echo", "said: {text}"]).param(
            "text",
            ParamKind::String,
            "The text.",
            true,
        )
    }

    #[tokio::test]
    async fn parameters_are_single_arguments_never_shell_syntax() {
        for attack in [
            "; rm -rf /",
            "$(whoami)",
            "`id`",
            "a && echo pwned",
            "x' \"y",
        ] {
            let out = echo()
                .call(json!({"text": attack}), ToolContext::for_test("t"))
                .await
                .unwrap();
            assert_eq!(out, format!("exit status 0\nsaid: {attack}\n"));
        }
    }

    #[tokio::test]
    async fn arguments_are_typed_and_checked() {
        let seq = CommandTool::new("count", "Count.", ["seq", "{n}"]).param(
            "n",
            ParamKind::Integer,
            "How far.",
            true,
        );
        assert_eq!(
            seq.call(json!({"n": 3}), ToolContext::for_test("t"))
                .await
                .unwrap(),
            "exit status 0\n1\n2\n3\n"
        );
        let bad = seq
            .call(json!({"n": "3; ls"}), ToolContext::for_test("t"))
            .await
            .unwrap_err();
        assert!(bad.is_invalid_arguments());
        assert!(
            bad.message()
                .contains("`n`: \"3; ls\" is not of type \"integer\""),
            "{}",
            bad.message()
        );
        let missing = seq
            .call(json!({}), ToolContext::for_test("t"))
            .await
            .unwrap_err();
        assert!(missing.message().contains("`n` is missing"));
    }

    #[tokio::test]
    async fn output_is_capped_runs_time_out_and_failures_report_the_status() {
        let long = CommandTool::new("long", "Long.", ["seq", "1", "100000"]).max_output(50);
        let out = long
            .call(json!({}), ToolContext::for_test("t"))
            .await
            .unwrap()
            .text;
        assert!(
            out.ends_with("[output cut: 588895 characters in all]"),
            "{out}"
        );
        let slow =
            CommandTool::new("slow", "Slow.", ["sleep", "5"]).timeout(Duration::from_millis(100));
        let started = std::time::Instant::now();
        let error = slow
            .call(json!({}), ToolContext::for_test("t"))
            .await
            .unwrap_err();
        assert!(
            error.message().contains("did not finish within 100ms"),
            "{}",
            error.message()
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "it did not wait for `sleep`"
        );
        let failing = CommandTool::new("fail", "Fail.", ["ls", "/no/such/dir"]);
        let error = failing
            .call(json!({}), ToolContext::for_test("t"))
            .await
            .unwrap_err();
        assert!(
            error
                .message()
                .starts_with("exit status 2\n\n[stderr]\nls: cannot access"),
            "{}",
            error.message()
        );
    }

    #[test]
    fn a_tools_file_declares_tools_and_its_mistakes_are_named() {
        let tools = CommandTool::parse(
            r#"
                [[tool]]
                name = "ping_host"
                description = "Ping a host three times."
                command = ["ping", "-c", "3", "{host}"]
                timeout = "10s"
                confirm = "Ping {host}?"
                [tool.params.host]
                type = "string"
                description = "Host name or address."
                required = true
            "#,
        )
        .unwrap();
        assert_eq!(tools[0].spec().parameters["required"], json!(["host"]));
        assert_eq!(
            tools[0]
                .confirmation(&json!({"host": "example.org"}))
                .as_deref(),
            Some("Ping example.org?")
        );
        // Checked before anyone is asked "Ping ?".
        assert!(
            tools[0]
                .check_arguments(&json!({"host": "example.org"}))
                .is_ok()
        );
        let missing = tools[0].check_arguments(&json!({})).unwrap_err();
        assert!(
            missing.message().contains("`host` is missing"),
            "{}",
            missing.message()
        );
        assert_eq!(Tool::timeout(&tools[0]), Some(Duration::from_secs(11)));

        let typo =
            CommandTool::parse("[[tool]]\nname = \"x\"\ndescription = \"d\"\ncomand = [\"ls\"]\n")
                .unwrap_err();
        assert!(typo.contains("unknown field `comand`"), "{typo}");
        let placeholder = CommandTool::parse(
            "[[tool]]\nname = \"x\"\ndescription = \"d\"\ncommand = [\"ls\", \"{dir}\"]\n",
        )
        .unwrap_err();
        assert_eq!(
            placeholder,
            "`{dir}` in the command of `x` is not one of its params"
        );
        let missing = CommandTool::new("ghost", "Ghost.", ["ferrobot-no-such-program"]);
        assert!(missing.availability().unwrap_err().contains("not on PATH"));
    }
}
