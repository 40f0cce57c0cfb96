// What a bound execution shows, folded from the attach wire (the page's twin of the terminal
// console's State): session/update payloads and _agent_channel/* notifications go in, keyed
// entries come out. Bounded: MAX_ENTRIES entries, MAX_TEXT characters of each (the tail).
import type { Json, Obj } from "./wire";

export const META = "agent_channel.";
export const MAX_ENTRIES = 2000;
export const MAX_TEXT = 20000;
export const CUT_TO = (MAX_TEXT * 3) / 4;
/** Message ids remembered after they left the queue (read or withdrawn). */
export const MAX_LEFT = 256;

export interface Entry {
  key: string;
  kind: "operator" | "user" | "system" | "agent" | "reasoning" | "tool" | "note";
  text: string;
  title: string;
  status: string;
  result: string;
  interrupted: boolean;
  version: number;
  /** Chunks not joined into `text` yet: joined once when drawn (see `settled`), not once
   * per chunk, which under 5,000 chunks a second copied the whole text each time. */
  pending: string[];
  /** How many times `text` lost its head (see `settled`): the view appends to what it drew
   * while this stays, and draws the whole text again when it moves. */
  cuts: number;
}

/** `e.text` with its pending chunks joined in; over MAX_TEXT characters, cut to its last
 * CUT_TO: cut by a quarter at a time, so a long stream's drawn text loses its head (and is
 * laid out whole again) once per 5,000 characters instead of at every draw. */
export function settled(e: Entry): string {
  if (e.pending.length) {
    const joined = e.text + e.pending.join("");
    e.pending = [];
    if (joined.length > MAX_TEXT) {
      e.text = joined.slice(-CUT_TO);
      e.cuts++;
    } else {
      e.text = joined;
    }
  }
  return e.text;
}

export interface Queued { id: string; text: string; client: string }

export interface Approval {
  toolCall: Obj;
  options: { optionId: string; name: string; kind: string }[];
  answer(optionId: string | null): void;
}

function obj(v: Json | undefined): Obj {
  return v !== null && typeof v === "object" && !Array.isArray(v) ? v : {};
}

export function textOf(block: Json | undefined): string {
  const b = obj(block);
  if (b.type === "text") return String(b.text ?? "");
  if (b.type === "content") return textOf(b.content);
  if (b.type === "resource_link") return `[link ${String(b.uri ?? "")}]`;
  return b.type ? `[${String(b.type)}]` : "";
}

export class Fold {
  entries = new Map<string, Entry>();
  title = "";
  role = "";
  turn = "";
  queue: Queued[] = [];
  children: Obj[] = [];
  /** Whether a children notification came (else the list's rows stand in). */
  childrenKnown = false;
  approval: Approval | null = null;
  ended: Obj | null = null;
  /** Ids of messages that left the queue (the agent read them, or they were withdrawn),
   * newest last, at most MAX_LEFT: a "queued as" notice goes when its id is here. */
  left = new Set<string>();
  /** Whether a turn_state came on this binding; until then the list's row says (`seed`). */
  turnKnown = false;
  private listed = "";
  /** The JSON-RPC id of each permission request waiting here, to its tool call's id. */
  private requests = new Map<Json, string>();
  private counter = 0;

  get status(): string {
    if (this.ended) return this.ended.error ? "failed" : "finished";
    if (!this.turnKnown && this.listed) return this.listed;
    return this.turn === "started" ? "running" : "waiting for operator";
  }

  /** The execution's row in the list, while this binding has not said its turn yet (a first
   * load before the replay): the header then says what the table says. */
  seed(row: Obj | undefined): void {
    if (this.turnKnown || !row) return;
    this.listed = String(row.status ?? "");
    this.turn = String(row.turnState ?? "");
  }

  /** A permission request arrived (its id, before the page is asked). */
  asked(id: Json, params: Obj): void {
    this.requests.set(id, String(obj(params.toolCall).toolCallId ?? ""));
  }

  /** The server stopped waiting for request `id`: its box goes (a late answer is dropped). */
  withdrawn(id: Json): void {
    const toolCallId = this.requests.get(id);
    this.requests.delete(id);
    const a = this.approval;
    if (toolCallId === undefined || !a || String(a.toolCall.toolCallId ?? "") !== toolCallId) return;
    this.note(`no longer asked (answered elsewhere, or void): ${String(a.toolCall.title ?? toolCallId)}`);
    a.answer(null);
  }

  note(text: string): void {
    this.put({ key: `note:${++this.counter}`, kind: "note", text });
  }

  runningTools(): Entry[] {
    return [...this.entries.values()].filter((e) => e.kind === "tool" && e.status === "in_progress");
  }

  update(u: Obj): void {
    const kind = u.sessionUpdate;
    const meta = obj(u._meta);
    if (kind === "agent_message_chunk" || kind === "agent_thought_chunk") {
      if (`${META}bound` in meta) {
        this.role = obj(meta[`${META}bound`]).interactive ? "driver" : "observer";
        return;
      }
      if (`${META}targets` in meta) return; // a picker: the page binds by id, never picks
      const id = String(u.messageId ?? "");
      if (`${META}modelCall` in meta) {
        for (const which of ["agent", "reasoning"]) {
          const e = this.entries.get(`msg:${id}:${which}`);
          if (e) { e.interrupted = true; e.version++; }
        }
        return;
      }
      const which = kind === "agent_message_chunk" ? "agent" : "reasoning";
      this.append(`msg:${id}:${which}`, which, textOf(u.content));
    } else if (kind === "user_message_chunk") {
      const which = meta[`${META}role`] === "system" ? "system"
        : meta[`${META}source`] === "operator" ? "operator" : "user";
      this.append(`msg:${String(u.messageId ?? "")}:${which}`, which, textOf(u.content));
    } else if (kind === "tool_call" || kind === "tool_call_update") {
      const e = this.tool(String(u.toolCallId));
      if (u.title) e.title = String(u.title);
      if (u.status) e.status = String(u.status);
      else if (kind === "tool_call") e.status = "pending";
      const content = u.content;
      if (Array.isArray(content) && content.length) e.result = content.map(textOf).join(" ").trim();
      else if (u.rawOutput !== undefined && u.rawOutput !== null) e.result = JSON.stringify(u.rawOutput);
      if (e.status === "failed" && /cancel/i.test(e.result)) e.status = "cancelled";
      e.version++;
    } else if (kind === "session_info_update" && u.title) {
      this.title = String(u.title);
    }
  }

  notification(method: string, p: Obj): void {
    const name = method.replace(/^_?agent_channel\//, "");
    if (name === "turn_state") {
      this.turn = String(p.state ?? "");
      this.turnKnown = true;
      if (this.turn === "cancelled") {
        for (const e of this.entries.values()) {
          if (e.kind === "tool" && (e.status === "in_progress" || e.status === "pending")) {
            e.status = "cancelled"; e.version++;
          }
        }
      }
    } else if (name === "queue") {
      const rows = Array.isArray(p.messages) ? p.messages : [];
      const before = this.queue;
      this.queue = rows.map((r) => obj(r)).map((q) => ({
        id: String(q.id ?? ""), text: String(q.text ?? ""), client: String(q.client ?? ""),
      }));
      const now = new Set(this.queue.map((q) => q.id));
      for (const q of before) if (!now.has(q.id)) this.left.add(q.id);
      for (const id of this.left) { if (this.left.size <= MAX_LEFT) break; this.left.delete(id); }
    } else if (name === "children") {
      this.children = (Array.isArray(p.children) ? p.children : []).map((r) => obj(r));
      this.childrenKnown = true;
    } else if (name === "session_ended") {
      this.ended = p;
      this.queue = [];
      this.approval = null;
      this.note(endedText(p));
    } else if (name === "dropped") {
      this.note(`the server dropped this page: ${String(p.reason ?? "")}`);
    }
  }

  private put(partial: Partial<Entry> & Pick<Entry, "key" | "kind">): Entry {
    const e: Entry = {
      text: "", title: "", status: "", result: "", interrupted: false, version: 0, pending: [], cuts: 0,
      ...partial,
    };
    this.entries.set(e.key, e);
    while (this.entries.size > MAX_ENTRIES) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
    return e;
  }

  private append(key: string, kind: Entry["kind"], text: string): void {
    const e = this.entries.get(key) ?? this.put({ key, kind });
    e.pending.push(text);
    if (e.pending.length > 4096) settled(e); // bounded between two draws too
    e.version++;
  }

  private tool(id: string): Entry {
    const key = `tool:${id}`;
    return this.entries.get(key) ?? this.put({ key, kind: "tool", title: id, status: "pending" });
  }
}

export function endedText(p: Obj): string {
  let text = p.error
    ? `The execution failed: ${String(p.error).replace(/\.$/, "")}.`
    : `The execution has ended (${String(p.stopReason ?? "finished")}).`;
  const undelivered = Array.isArray(p.undelivered) ? p.undelivered.map((u) => obj(u)) : [];
  if (undelivered.length) {
    text += ` ${undelivered.length} message(s) were never read by the agent:`;
    for (const u of undelivered) text += `\n  - ${String(u.text ?? "").trim()}`;
  } else {
    text += " Nothing you sent was left unread.";
  }
  return text;
}
