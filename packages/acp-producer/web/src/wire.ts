// The page's ACP connections: the official SDK's client app over a browser WebSocket.
// The token comes from the URL fragment (#token=...), which never reaches the server's logs.
import {
  client, type ClientConnection, type RequestPermissionRequest,
} from "@agentclientprotocol/sdk";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";

export const EXT = "_agent_channel/";
export const TOKEN_KEY = "agent_channel.token";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type Obj = { [key: string]: Json };

export function tokenOfPage(): string | null {
  const fragment = new URLSearchParams(location.hash.replace(/^#/, ""));
  return fragment.get("token");
}

function wsUrl(): string {
  return `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/acp`;
}

export interface Handlers {
  update?(sessionId: string, update: Obj): void;
  notification?(method: string, params: Obj): void;
  permission?(params: RequestPermissionRequest): Promise<string | null>;
  /** A permission request arrived under JSON-RPC id `id` (before `permission` runs). */
  asked?(id: Json, params: Obj): void;
  /** `$/cancel_request`: the server stopped waiting for request `id` (answered elsewhere,
   * an interrupt, a stop): what it asked is void. */
  withdrawn?(id: Json): void;
  closed?(why: string): void;
}

/** An error from the server as one line: its data.reason when it gives one. */
export function describe(e: unknown): string {
  const err = e as { message?: string; code?: number; data?: { reason?: string; details?: string } };
  const reason = err?.data?.reason ?? err?.data?.details;
  if (reason) return String(reason);
  return err?.message ? `${err.message}${err.code !== undefined ? ` (code ${err.code})` : ""}` : String(e);
}

export class TokenRefused extends Error {}

/** A WebSocket whose notifications are folded on arrival, in wire order, straight from their
 * JSON; only requests and responses reach the SDK's listener. Under 5,000 chunks a second the
 * SDK's path for each notification (its stream, validation, promise dispatch) capped what
 * the page could read below the stream's rate and the drawn page fell seconds behind; the
 * terminal console's link folds the same way (operator/console/_client.py). */
function foldingSocket(handlers: Handlers): typeof WebSocket {
  const fold = (data: unknown): boolean => {
    if (typeof data !== "string") return false;
    let m: { id?: unknown; method?: unknown; params?: unknown };
    try { m = JSON.parse(data) as typeof m; } catch { return false; }
    if (typeof m.method !== "string" || !m.params || typeof m.params !== "object") return false;
    const params = m.params as Obj;
    if (m.id !== undefined) { // a request: the SDK answers it; its id names it in a withdraw
      if (m.method === "session/request_permission") handlers.asked?.(m.id as Json, params);
      return false;
    }
    if (m.method === "$/cancel_request") {
      handlers.withdrawn?.(params.requestId ?? null);
      return true;
    }
    if (m.method === "session/update") {
      handlers.update?.(String(params.sessionId), (params.update ?? {}) as Obj);
      return true;
    }
    if (m.method.startsWith(EXT)) {
      handlers.notification?.(m.method, params);
      return true;
    }
    return false;
  };
  return class extends WebSocket {
    override addEventListener(type: string, listener: EventListenerOrEventListenerObject, options?: boolean | AddEventListenerOptions): void {
      if (type !== "message" || typeof listener !== "function") {
        super.addEventListener(type, listener, options);
        return;
      }
      super.addEventListener("message", (ev: MessageEvent) => { if (!fold(ev.data)) listener.call(this, ev); }, options);
    }
  };
}

/** One initialized connection; `handlers` get what the server streams on it. */
export async function connect(token: string, handlers: Handlers): Promise<ClientConnection> {
  const app = client()
    .onNotification("session/update", ({ params }) => {
      handlers.update?.(params.sessionId, params.update as unknown as Obj);
    })
    .onNotification("*", ({ method, params }) => {
      handlers.notification?.(method, (params ?? {}) as Obj);
    })
    .onRequest("session/request_permission", async ({ params }) => {
      const chosen = handlers.permission ? await handlers.permission(params) : null;
      return chosen === null
        ? { outcome: { outcome: "cancelled" as const } }
        : { outcome: { outcome: "selected" as const, optionId: chosen } };
    });
  const stream = createWebSocketStream(wsUrl(), { protocols: [], cookies: "omit", WebSocket: foldingSocket(handlers) });
  const conn = app.connect(stream);
  let initialized = false;
  void conn.closed.then(() => handlers.closed?.(initialized ? "the server closed the connection" : "could not connect"));
  try {
    await conn.agent.request("initialize", {
      protocolVersion: 1,
      clientCapabilities: {},
      clientInfo: { name: "web-console", version: "0.1.0" },
      _meta: { [TOKEN_KEY]: token },
    });
  } catch (e) {
    conn.close();
    const why = describe(e);
    if (/token/i.test(why)) throw new TokenRefused(why);
    throw new Error(why);
  }
  initialized = true;
  return conn;
}

export async function ext<T = Obj>(conn: ClientConnection, name: string, params: Obj): Promise<T> {
  return await conn.agent.request<T, Obj>(EXT + name, params);
}
