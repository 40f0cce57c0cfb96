// The page's controller: a fleet connection that lists every execution (A24) once a second,
// and a session connection bound (session/load) to the execution the operator selects.
// Each change marks the page dirty; it is drawn at most once per animation frame.
import type { ClientConnection } from "@agentclientprotocol/sdk";
import { Fold, type Approval } from "./fold";
import { connect, describe, ext, TokenRefused, type Obj } from "./wire";

export const LIST_EVERY_MS = 1000;
const MESSAGE_ID = "agent_channel.messageId";
/** The page is drawn at most this often (at an animation frame): a stream of thousands of
 * chunks a second then costs a few draws a second, and the CPU goes to reading the stream. */
export const DRAW_EVERY_MS = 100;

export class Console {
  executions: Obj[] = [];
  selected: string | null = null;
  fold = new Fold();
  fatal = "";
  status = "connecting";
  notice = "";
  private fleet: ClientConnection | null = null;
  private session: ClientConnection | null = null;
  private binding = 0;
  private frame = 0;
  private drawn = -Infinity;

  constructor(private token: string | null, private draw: () => void) {}

  changed(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame((now) => {
      const wait = this.drawn + DRAW_EVERY_MS - now;
      if (wait > 0) {
        this.frame = 0;
        this.frame = window.setTimeout(() => { this.frame = 0; this.changed(); }, wait) + 0;
        return;
      }
      this.frame = 0;
      this.drawn = now;
      this.draw();
    });
  }

  async start(): Promise<void> {
    if (!this.token) {
      this.fatal = "No token: open the address `agent-channel-acp web` prints (it ends in #token=…).";
      this.changed();
      return;
    }
    try {
      this.fleet = await connect(this.token, { closed: (why) => this.lost(why) });
    } catch (e) {
      this.fatal = e instanceof TokenRefused
        ? `The server refused this page's token (${e.message}). Open the address \`agent-channel-acp web\` prints for the running server.`
        : `Cannot reach the server: ${describe(e)}`;
      this.changed();
      return;
    }
    this.status = "connected";
    await this.list();
    setInterval(() => void this.list(), LIST_EVERY_MS);
  }

  private lost(why: string): void {
    if (this.fatal) return;
    this.status = `disconnected: ${why} (reload the page once the server is back)`;
    this.changed();
  }

  async list(): Promise<void> {
    if (!this.fleet) return;
    try {
      const answer = await ext<{ executions?: Obj[] }>(this.fleet, "list", {});
      this.executions = answer.executions ?? [];
      if (this.selected === null && this.executions.length) {
        const first = this.executions.find((e) => e.drivable !== false) ?? this.executions[0]!;
        void this.select(String(first.id));
      }
    } catch (e) {
      this.notice = `list: ${describe(e)}`;
    }
    this.changed();
  }

  async select(id: string): Promise<void> {
    if (id === this.selected && this.session) return;
    const binding = ++this.binding;
    this.selected = id;
    this.session?.close();
    this.session = null;
    const fold = (this.fold = new Fold());
    this.changed();
    try {
      const conn = await connect(this.token!, {
        update: (sid, u) => { if (sid === id && this.fold === fold) { fold.update(u); this.changed(); } },
        notification: (m, p) => { if (p.sessionId === id && this.fold === fold) { fold.notification(m, p); this.changed(); } },
        permission: (params) => this.ask(fold, params as unknown as Obj),
      });
      if (binding !== this.binding) { conn.close(); return; }
      this.session = conn;
      await conn.agent.request("session/load", { sessionId: id, cwd: "/", mcpServers: [] });
    } catch (e) {
      if (binding === this.binding) fold.note(`could not bind: ${describe(e)}`);
    }
    this.changed();
  }

  private ask(fold: Fold, params: Obj): Promise<string | null> {
    return new Promise((resolve) => {
      const approval: Approval = {
        toolCall: (params.toolCall ?? {}) as Obj,
        options: (Array.isArray(params.options) ? params.options : []) as unknown as Approval["options"],
        answer: (optionId) => {
          if (fold.approval === approval) fold.approval = null;
          this.changed();
          resolve(optionId);
        },
      };
      fold.approval = approval;
      this.changed();
    });
  }

  private async act(what: string, call: (c: ClientConnection, sid: string) => Promise<string>): Promise<void> {
    const conn = this.session;
    const sid = this.selected;
    if (!conn || !sid) return;
    try {
      this.notice = await call(conn, sid);
    } catch (e) {
      this.notice = `${what}: ${describe(e)}`;
    }
    this.changed();
    void this.list();
  }

  send(text: string): Promise<void> {
    return this.act("send", async (c, sessionId) => {
      const answer = await c.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
      const id = (answer._meta ?? {})[MESSAGE_ID];
      return id ? `queued as ${String(id)}: the agent reads it at its next step` : "sent";
    });
  }

  interrupt(): Promise<void> {
    return this.act("interrupt", async (c, sessionId) => {
      const a = await ext(c, "cancel_turn", { sessionId });
      return a.cancelled ? "interrupted the turn: send a redirect" : `nothing to interrupt (${String(a.reason ?? "")})`;
    });
  }

  cancelTool(toolCallId: string): Promise<void> {
    return this.act("cancel tool", async (c, sessionId) => {
      const a = await ext(c, "cancel_tool_call", { sessionId, toolCallId });
      return a.cancelled ? `cancelled tool call ${toolCallId}` : `tool call ${toolCallId} was not cancelled (${String(a.reason ?? "")})`;
    });
  }

  withdraw(messageId: string): Promise<void> {
    return this.act("withdraw", async (c, sessionId) => {
      const a = await ext(c, "withdraw", { sessionId, messageId });
      if (a.withdrawn) this.fold.note("withdrawn before the agent read it");
      return a.withdrawn ? `withdrew ${messageId}` : `${messageId} was not withdrawn: the agent had read it`;
    });
  }

  end(): Promise<void> {
    return this.act("end", async (c, sessionId) => {
      await ext(c, "end", { sessionId, reason: "ended from the web console" });
      return `ended ${sessionId}`;
    });
  }
}
