// The AI SDK's client reading a UI message stream: stdin holds server-sent events (what
// ChatStream.sse() or resume_sse() wrote); they are parsed and checked as DefaultChatTransport
// does (parseJsonEventStream with the SDK's uiMessageChunkSchema: a chunk the client would
// refuse fails here) and folded by readUIMessageStream. Prints {"message": the last UIMessage,
// "chunks": [chunk types], "data": [transient data chunks], "errors": [...]} as JSON.
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from "ai";

const text = await new Promise((resolve) => {
  let data = "";
  process.stdin.on("data", (chunk) => (data += chunk));
  process.stdin.on("end", () => resolve(data));
});
const bytes = new ReadableStream({
  start(controller) {
    controller.enqueue(new TextEncoder().encode(text));
    controller.close();
  },
});
const types = [];
const data = [];
const errors = [];
const chunks = parseJsonEventStream({ stream: bytes, schema: uiMessageChunkSchema }).pipeThrough(
  new TransformStream({
    transform(result, controller) {
      if (!result.success) {
        errors.push(String(result.error && result.error.message || result.error).slice(0, 500));
        return;
      }
      types.push(result.value.type);
      if (result.value.type.startsWith("data-") && result.value.transient) data.push(result.value);
      if (result.value.type === "error") errors.push("error chunk: " + result.value.errorText);
      controller.enqueue(result.value);
    },
  }),
);
let last = null;
for await (const message of readUIMessageStream({ stream: chunks, onError: (e) => errors.push(String(e)) })) {
  last = message;
}
process.stdout.write(JSON.stringify({ message: last, chunks: types, data, errors }));
