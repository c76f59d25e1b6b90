// The AI SDK's own answers for the Python tests: reads a JSON request on stdin, writes JSON on
// stdout. One process answers a whole batch of cases (Node starts in ~100 ms).
//
//   {"command": "convert", "cases": [[UIMessage...], ...]}
//     -> [{"messages": [chat-completions message...]} | {"error": "..."}, ...]
//     convertToModelMessages, then the mechanical mapping below from the SDK's ModelMessage
//     shape to chat-completions messages.
//   {"command": "validate", "cases": [value, ...]}
//     -> [{"ok": true} | {"ok": false, "error": "..."}, ...]   (safeValidateUIMessages)
//
// The mapping (what ctxstore.ui.to_model_messages promises to agree with):
//   system     {role: "system", content}
//   user       one text part: content is its text; else a list: text -> {type: "text", text},
//              a file whose media type is image or image/* -> {type: "image_url", image_url:
//              {url}}, any other file -> {type: "file", file: {file_data: url, filename?}}
//   assistant  text parts concatenated (as the SDK's OpenAI chat provider does); each
//              tool-call -> tool_calls[{id, type: "function", function: {name, arguments:
//              JSON.stringify(input ?? {})}}]; content is the text, or null when there are
//              calls and no text; reasoning and file parts are not sent; a message left with
//              neither text nor calls is not sent
//   tool       one {role: "tool", tool_call_id, content} per tool-result: text and error-text
//              outputs as their value, json as JSON.stringify(value), execution-denied as its
//              reason or "Tool call execution denied."; approval responses are not sent
import { convertToModelMessages, safeValidateUIMessages } from "ai";

const input = JSON.parse(await new Promise((resolve) => {
  let data = "";
  process.stdin.on("data", (chunk) => (data += chunk));
  process.stdin.on("end", () => resolve(data));
}));

function userContent(content) {
  if (typeof content === "string") return content;
  if (content.length === 1 && content[0].type === "text") return content[0].text;
  return content.map((part) => {
    if (part.type === "text") return { type: "text", text: part.text };
    const url = part.data.url.toString();
    const media = part.mediaType;
    if (media === "image" || media.startsWith("image/")) {
      return { type: "image_url", image_url: { url } };
    }
    const file = { file_data: url };
    if (part.filename !== undefined) file.filename = part.filename;
    return { type: "file", file };
  });
}

function toolContent(output) {
  switch (output.type) {
    case "text":
    case "error-text":
      return output.value;
    case "execution-denied":
      return output.reason ?? "Tool call execution denied.";
    default:
      return JSON.stringify(output.value);
  }
}

function toChatCompletions(modelMessages) {
  const out = [];
  for (const message of modelMessages) {
    switch (message.role) {
      case "system":
        out.push({ role: "system", content: message.content });
        break;
      case "user":
        out.push({ role: "user", content: userContent(message.content) });
        break;
      case "assistant": {
        let text = "";
        const calls = [];
        const parts = typeof message.content === "string"
          ? [{ type: "text", text: message.content }] : message.content;
        for (const part of parts) {
          if (part.type === "text") text += part.text;
          if (part.type === "tool-call") {
            calls.push({
              id: part.toolCallId,
              type: "function",
              function: { name: part.toolName, arguments: JSON.stringify(part.input ?? {}) },
            });
          }
        }
        if (calls.length > 0) out.push({ role: "assistant", content: text || null, tool_calls: calls });
        else if (text) out.push({ role: "assistant", content: text });
        break;
      }
      case "tool":
        for (const part of message.content) {
          if (part.type !== "tool-result") continue;
          out.push({ role: "tool", tool_call_id: part.toolCallId, content: toolContent(part.output) });
        }
        break;
    }
  }
  return out;
}

const results = [];
for (const item of input.cases) {
  try {
    if (input.command === "convert") {
      results.push({ messages: toChatCompletions(await convertToModelMessages(item)) });
    } else if (input.command === "validate") {
      const checked = await safeValidateUIMessages({ messages: item });
      results.push(checked.success ? { ok: true } : { ok: false, error: String(checked.error.message).slice(0, 300) });
    } else {
      throw new Error(`unknown command ${input.command}`);
    }
  } catch (error) {
    results.push({ error: String(error && error.message || error).slice(0, 300) });
  }
}
process.stdout.write(JSON.stringify(results));
