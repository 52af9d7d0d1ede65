// One call through the official TypeScript SDK, for Plumbline's SDK-* properties.
//
//   node driver.cjs <path of the installed @anthropic-ai/sdk> < request.json > result.json
//
// request: {base_url, api_key, headers, operation: "create" | "stream", params, timeout_ms}
// result:  {ok: true, message} (the SDK's Message; for "stream", stream.finalMessage())
//       or {ok: false, error: {class, status, type, request_id, body, message}}
// Whatever the SDK throws is a result, never a crash: the harness judges it.
"use strict";

const Anthropic = require(process.argv[2]);

async function call(request) {
  const client = new Anthropic({
    baseURL: request.base_url,
    apiKey: request.api_key,
    defaultHeaders: request.headers ?? {}, // a null value removes a header the SDK would send
    maxRetries: 0,
    timeout: request.timeout_ms,
  });
  if (request.operation === "stream") {
    return client.messages.stream(request.params).finalMessage();
  }
  if (request.operation === "create") {
    return client.messages.create(request.params);
  }
  throw new Error(`unknown operation ${request.operation}`);
}

function described(error) {
  const api = error instanceof Anthropic.APIError;
  return {
    class: error?.name ?? typeof error,
    status: api ? (error.status ?? null) : null,
    type: api ? (error.type ?? null) : null,
    request_id: api ? (error.requestID ?? null) : null,
    body: api ? (error.error ?? null) : null,
    message: String(error?.message ?? error),
  };
}

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const request = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  let result;
  try {
    result = { ok: true, message: await call(request) };
  } catch (error) {
    result = { ok: false, error: described(error) };
  }
  process.stdout.write(JSON.stringify(result));
}

main();
