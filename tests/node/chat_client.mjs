// A useChat client without a browser: the AI SDK's DefaultChatTransport against a running
// backend, its answer folded by readUIMessageStream. stdin: {"api", "chatId", "messages",
// "trigger", "messageId", "headers", "disconnectAfter"}. With disconnectAfter N, the client reads
// N chunks, drops the connection (aborts the request), then reconnects with reconnectToStream
// and reads the answer from there. Prints {"message", "chunks": [types], "resumed",
// "firstChunks": [types before the disconnect]} as JSON.
import { DefaultChatTransport, readUIMessageStream } from "ai";

const input = JSON.parse(await new Promise((resolve) => {
  let data = "";
  process.stdin.on("data", (chunk) => (data += chunk));
  process.stdin.on("end", () => resolve(data));
}));
const transport = new DefaultChatTransport({ api: input.api, headers: input.headers ?? {} });
const controller = new AbortController();
const types = [];
const counted = (stream) => stream.pipeThrough(new TransformStream({
  transform(chunk, out) { types.push(chunk.type); out.enqueue(chunk); },
}));

async function last(stream) {
  let message = null;
  for await (const built of readUIMessageStream({ stream: counted(stream) })) message = built;
  return message;
}

const sent = await transport.sendMessages({
  chatId: input.chatId,
  messages: input.messages,
  trigger: input.trigger ?? "submit-message",
  messageId: input.messageId,
  abortSignal: controller.signal,
});
let result;
if (input.disconnectAfter) {
  const reader = sent.getReader();
  const first = [];
  while (first.length < input.disconnectAfter) {
    const { value, done } = await reader.read();
    if (done) break;
    first.push(value.type);
  }
  controller.abort();
  await reader.cancel().catch(() => {});
  const resumed = await transport.reconnectToStream({ chatId: input.chatId });
  result = { firstChunks: first, resumed: resumed !== null };
  if (resumed) result.message = await last(resumed);
} else {
  result = { resumed: false, message: await last(sent) };
}
result.chunks = types;
process.stdout.write(JSON.stringify(result));
