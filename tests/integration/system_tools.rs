//! The batteries-included system tools, reading this machine.

use ferrobot::tool::{Tool, ToolContext};
use serde_json::{Value, json};

async fn call(tool: &dyn Tool, arguments: Value) -> Result<Value, String> {
    tool.call(arguments, ToolContext::for_test("t"))
        .await
        .map(|text| serde_json::from_str(&text).unwrap_or(Value::String(text)))
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
