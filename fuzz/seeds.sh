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
mkdir -p "$out"/{stream_decoders,tool_arguments,slash_commands,split_message,telegram_markdown,recordings}

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
