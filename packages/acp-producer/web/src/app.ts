// The page's controller: a fleet connection that lists every execution (A24) once a second,
// and a session connection bound (session/load) to the execution the operator selects; a
// dropped one is made again by itself (backoff), and the binding with it.
// Each change marks the page dirty; it is drawn at most once per animation frame.
import type { ClientConnection } from "@agentclientprotocol/sdk";
import { Fold, type Approval } from "./fold";
import { connect, describe, ext, TokenRefused, type Obj } from "./wire";

export const LIST_EVERY_MS = 1000;
const MESSAGE_ID = "agent_channel.messageId";
/** The page is drawn at most this often (at an animation frame): a stream of thousands of
 * chunks a second then costs a few draws a second, and the CPU goes to reading the stream. */
export const DRAW_EVERY_MS = 100;
/** A dropped connection is tried again after this, doubling up to RECONNECT_MAX_MS. */
export const RECONNECT_FIRST_MS = 250;
export const RECONNECT_MAX_MS = 5000;
/** How many of a child's last messages its open conversation shows. */
export const CHILD_TAIL = 50;

export interface OpenChild { id: string; name: string; messages: Obj[]; error: string; seen: string }

export class Console {
  executions: Obj[] = [];
  selected: string | null = null;
  /** The child whose conversation is open (K12), as the terminal console's ctrl+r reads it. */
  child: OpenChild | null = null;
  fold = new Fold();
  fatal = "";
  status = "connecting";
  notice = "";
  /** The message a "queued as" notice is about: the notice goes once the agent read it. */
  private noticeFor: string | null = null;
  /** Whether the conversation pane follows its live end (the operator scrolled up: not). */
  follow = true;
  private fleet: ClientConnection | null = null;
  private fleetGeneration = 0;
  private everConnected = false;
  private session: ClientConnection | null = null;
  private binding = 0;
  private attempt = 0;
  private retry = 0;
  private childReads = 0;
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
    window.addEventListener("online", () => { if (this.retry) this.recoverNow(); });
    await this.recover();
    setInterval(() => void this.list(), LIST_EVERY_MS);
  }

  /** The fleet connection, the list, and the selected execution's binding, each made again
   * if it is missing; a failure tries again after a backoff (see `lost`). */
  private async recover(): Promise<void> {
    this.retry = 0;
    if (this.fatal) return;
    if (!this.fleet) {
      const generation = ++this.fleetGeneration;
      try {
        this.fleet = await connect(this.token!, {
          closed: (why) => { if (generation === this.fleetGeneration) this.lost("fleet", why); },
        });
      } catch (e) {
        if (e instanceof TokenRefused) {
          this.refused(e);
          return;
        }
        this.lost("fleet", this.everConnected ? describe(e) : `cannot reach the server: ${describe(e)}`);
        return;
      }
      this.everConnected = true;
      this.status = "connected";
      this.notice = "";
    }
    await this.list();
    const id = this.selected;
    if (id !== null && !this.session && this.fleet) {
      if (this.executions.some((e) => String(e.id) === id)) {
        await this.bind(id, false);
      } else {
        this.selected = null; // gone (a server without a store): the list picks another
        this.fold = new Fold();
        await this.list();
      }
    }
    if (this.fleet && (this.session || this.selected === null)) this.attempt = 0;
    this.changed();
  }

  /** The token is refused (a server restarted with another): the page's one line, no retry. */
  private refused(e: TokenRefused): void {
    this.fatal = `The server refused this page's token (${e.message}). Open the address \`agent-channel-acp web\` prints for the running server.`;
    clearTimeout(this.retry);
    this.changed();
  }

  private recoverNow(): void {
    clearTimeout(this.retry);
    void this.recover();
  }

  /** A connection dropped (the server restarted, the network went): say so and try again
   * after RECONNECT_FIRST_MS, doubling to RECONNECT_MAX_MS. */
  private lost(which: "fleet" | "session", why: string): void {
    if (this.fatal) return;
    if (which === "fleet") this.fleet = null;
    else this.session = null;
    if (!this.fleet) this.status = `reconnecting… (${why}; attempt ${this.attempt + 1})`;
    this.changed();
    if (this.retry) return;
    const wait = Math.min(RECONNECT_MAX_MS, RECONNECT_FIRST_MS * 2 ** this.attempt) * (0.8 + 0.2 * Math.random());
    this.attempt++;
    this.retry = window.setTimeout(() => void this.recover(), wait);
  }

  async list(): Promise<void> {
    if (!this.fleet) return;
    try {
      const answer = await ext<{ executions?: Obj[] }>(this.fleet, "list", {});
      this.executions = answer.executions ?? [];
      this.fold.seed(this.row(this.selected));
      if (this.child && !this.fold.childrenKnown) this.childMoved();
      if (this.selected === null && this.executions.length) {
        const first = this.executions.find((e) => e.drivable !== false) ?? this.executions[0]!;
        void this.select(String(first.id));
      }
    } catch (e) {
      if (this.fleet) this.notice = `list: ${describe(e)}`;
    }
    this.changed();
  }

  async select(id: string): Promise<void> {
    if (id === this.selected && this.session) return;
    this.selected = id;
    this.fold = new Fold();
    this.fold.seed(this.row(id));
    this.follow = true;
    this.child = null;
    this.changed();
    if (this.fleet) await this.bind(id, true);
  }

  /** Bind a connection of its own to execution `id` (session/load). The replay goes into a
   * new fold, shown once the load is answered (`fresh`: at once): a rebind after a drop
   * replaces what was drawn instead of adding the replay to it. */
  private async bind(id: string, fresh: boolean): Promise<void> {
    const binding = ++this.binding;
    this.session?.close();
    this.session = null;
    const fold = fresh ? this.fold : new Fold();
    fold.seed(this.row(id));
    const mine = () => binding === this.binding;
    let dropped = false;
    let conn: ClientConnection | null = null; // the closed handler may run before connect returns
    try {
      conn = await connect(this.token!, {
        update: (sid, u) => { if (sid === id && mine()) { fold.update(u); this.changed(); } },
        notification: (m, p) => {
          if (p.sessionId !== id || !mine()) return;
          fold.notification(m, p);
          if (m.endsWith("/children")) this.childMoved();
          if (this.noticeFor !== null && fold === this.fold && fold.left.has(this.noticeFor)) {
            this.notice = ""; // the agent read it (or it was withdrawn): no longer queued
            this.noticeFor = null;
          }
          this.changed();
        },
        permission: (params) => this.ask(fold, params as unknown as Obj),
        asked: (rid, params) => { if (mine()) fold.asked(rid, params); },
        withdrawn: (rid) => { if (mine()) { fold.withdrawn(rid); this.changed(); } },
        closed: (why) => { dropped = true; if (mine() && conn && this.session === conn) this.lost("session", why); },
      });
      if (!mine()) { conn.close(); return; }
      await conn.agent.request("session/load", { sessionId: id, cwd: "/", mcpServers: [] });
      if (!mine()) { conn.close(); return; }
      if (dropped) throw new Error("the connection closed");
      this.session = conn;
      this.fold = fold;
      if (this.child) void this.readChild();
    } catch (e) {
      if (!mine()) return;
      if (e instanceof TokenRefused) {
        this.refused(e);
        return;
      }
      if (dropped) {
        this.lost("session", describe(e));
      } else {
        this.fold = fold;
        fold.note(`could not bind: ${describe(e)}`);
      }
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
    if (!conn || !sid) {
      this.notice = `${what}: not connected (${this.fleet ? "binding" : "reconnecting"}…)`;
      this.changed();
      return;
    }
    this.noticeFor = null;
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
      if (!id) return "sent";
      if (this.fold.left.has(String(id))) return ""; // read already: nothing is queued
      this.noticeFor = String(id);
      return `queued as ${String(id)}: the agent reads it at its next step`;
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

  // -- children (K11, K12): the terminal console's ctrl+r, ctrl+e and ctrl+x ----------------

  /** The list's row of execution `id`. */
  private row(id: string | null): Obj | undefined {
    return id === null ? undefined : this.executions.find((e) => String(e.id) === id);
  }

  /** The bound execution's children in tree order: its _agent_channel/children notifications
   * once one came, else the list's rows for it. */
  children(): Obj[] {
    if (this.fold.childrenKnown) return this.fold.children;
    const row = this.executions.find((e) => String(e.id) === this.selected);
    return (Array.isArray(row?.children) ? row.children : []) as Obj[];
  }

  /** Open a child's conversation; from the fleet, of another execution's child. */
  async openChild(childId: string, name: string, parentId?: string): Promise<void> {
    if (parentId !== undefined && parentId !== this.selected) await this.select(parentId);
    this.child = { id: childId, name, messages: [], error: "", seen: "" };
    this.changed();
    await this.readChild();
  }

  closeChild(): void {
    this.child = null;
    this.changed();
  }

  /** The open child's last CHILD_TAIL messages (_agent_channel/messages with childId). */
  async readChild(): Promise<void> {
    const child = this.child;
    const conn = this.session;
    const sessionId = this.selected;
    if (!child || !conn || !sessionId) return;
    const read = ++this.childReads;
    try {
      const a = await ext<{ messages?: Obj[] }>(conn, "messages", { sessionId, childId: child.id, tail: CHILD_TAIL });
      if (read !== this.childReads) return;
      child.messages = a.messages ?? [];
      child.error = "";
    } catch (e) {
      if (read === this.childReads) child.error = describe(e);
    }
    this.changed();
  }

  /** A children notification: the open child is read again when its row moved. */
  private childMoved(): void {
    const child = this.child;
    const row = child && this.children().find((k) => String(k.id) === child.id);
    if (!child || !row) return;
    const seen = `${String(row.status)}/${String(row.turns)}/${String(row.lastActivity)}`;
    if (seen === child.seen) return;
    child.seen = seen;
    void this.readChild();
  }

  steerChild(text: string): Promise<void> {
    const child = this.child;
    if (!child) return Promise.resolve();
    return this.act("steer child", async (c, sessionId) => {
      const a = await ext(c, "steer_child", { sessionId, childId: child.id, text });
      void this.readChild();
      return `steer for child ${child.name}: ${String(a.outcome ?? "?")}${a.reason ? ` (${String(a.reason)})` : ""}`;
    });
  }

  stopChild(childId: string, name: string): Promise<void> {
    return this.act("stop child", async (c, sessionId) => {
      const a = await ext(c, "stop_child", { sessionId, childId });
      if (this.child?.id === childId) void this.readChild();
      return a.stopped ? `stopped child ${name}` : `child ${name} had ended`;
    });
  }
}
