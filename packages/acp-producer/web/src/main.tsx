// The web console's view (Preact). Everything it shows comes from the Console controller;
// rows and entries re-render only when their own version moves, so a fast stream costs one
// entry's text per frame.
import "./jitless";
import { Component, createRef, render } from "preact";
import { useLayoutEffect, useRef, useState } from "preact/hooks";
import { Console } from "./app";
import { settled, type Entry } from "./fold";
import type { Json, Obj } from "./wire";
import { tokenOfPage } from "./wire";

const LABELS: Record<string, string> = {
  pending: "pending", in_progress: "running", completed: "done", failed: "failed", cancelled: "cancelled",
};
/** A child's card is a tool call of this id prefix (K11): it opens and stops the child. */
const CHILD_CARD = "child-";

/** A child card's child, by name: from the children's rows (the card's title is its task). */
function childName(c: Console, cardId: string): string {
  const childId = cardId.slice(CHILD_CARD.length);
  const row = c.children().find((k) => String(k.id) === childId);
  return row?.name ? String(row.name) : childId;
}
const PREFIX: Record<string, string> = {
  operator: "operator", user: "user", system: "system", agent: "agent", reasoning: "thinking", note: "",
};

/** A message's text, drawn by appending to its DOM text node what came since the last draw:
 * setting the whole text instead made the browser lay out (and shape) all of it again at
 * every draw of a fast stream; an append lets it lay out the last lines only. */
class DrawnText extends Component<{ entry: Entry; version: number }> {
  private cuts = -1;
  private length = 0;
  private span = createRef<HTMLSpanElement>();
  shouldComponentUpdate(next: { entry: Entry; version: number }): boolean {
    if (next.entry !== this.props.entry) return true;
    this.sync(next.entry);
    return false;
  }
  componentDidMount(): void { this.sync(this.props.entry); }
  componentDidUpdate(): void { this.cuts = -1; this.sync(this.props.entry); }
  private sync(e: Entry): void {
    const text = settled(e);
    const span = this.span.current;
    if (!span) return;
    let node = span.firstChild as globalThis.Text | null;
    if (!node) node = span.appendChild(document.createTextNode(""));
    if (e.cuts === this.cuts && text.length >= this.length) {
      if (text.length > this.length) node.appendData(text.slice(this.length));
    } else {
      node.data = text;
    }
    this.cuts = e.cuts;
    this.length = text.length;
  }
  render() { return <span class="text" ref={this.span} />; }
}

class Row extends Component<{ entry: Entry; version: number; console: Console }> {
  shouldComponentUpdate(next: { version: number; entry: Entry }): boolean {
    return next.version !== this.props.version || next.entry !== this.props.entry;
  }
  render() {
    const { entry: e, console: c } = this.props;
    if (e.kind === "tool") {
      const id = e.key.slice("tool:".length);
      return (
        <div class={`entry tool ${e.status}`} data-testid="entry" data-kind="tool" data-key={e.key} data-status={e.status}>
          <span class="badge">{LABELS[e.status] ?? e.status}</span> <b>{e.title}</b>
          {e.result && <span class="result"> → {e.result}</span>}
          {e.status === "in_progress" && !id.startsWith(CHILD_CARD) && (
            <button data-testid="cancel-tool" onClick={() => void c.cancelTool(id)}>cancel this tool</button>
          )}
          {id.startsWith(CHILD_CARD) && (
            <button data-testid="open-child" onClick={() => void c.openChild(id.slice(CHILD_CARD.length), childName(c, id))}>open</button>
          )}
          {e.status === "in_progress" && id.startsWith(CHILD_CARD) && (
            <button data-testid="stop-child" class="danger" onClick={() => void c.stopChild(id.slice(CHILD_CARD.length), childName(c, id))}>stop</button>
          )}
        </div>
      );
    }
    return (
      <div class={`entry ${e.kind}${e.interrupted ? " interrupted" : ""}`} data-testid="entry" data-kind={e.kind} data-key={e.key}>
        {PREFIX[e.kind] && <span class="who">{PREFIX[e.kind]}{e.interrupted ? " (interrupted: not in the conversation)" : ""}</span>}
        <DrawnText entry={e} version={e.version} />
      </div>
    );
  }
}

function badges(e: Obj): string[] {
  const out: string[] = [];
  if (e.status === "waiting for operator") out.push("waiting for you");
  if (e.pendingApproval) out.push("approval pending");
  if (e.pendingQuestion) out.push("question pending");
  if (typeof e.queued === "number" && e.queued > 0) out.push(`${e.queued} queued`);
  if (e.drivable === false) out.push("observe-only");
  return out;
}

function Fleet({ c }: { c: Console }) {
  return (
    <table class="fleet" data-testid="fleet">
      <thead><tr><th>execution</th><th>status</th><th>turn</th><th>messages</th><th /></tr></thead>
      <tbody>
        {c.executions.map((e) => {
          const id = String(e.id);
          const children = (Array.isArray(e.children) ? e.children : []) as Obj[];
          return [
            <tr key={id} data-testid="execution" data-id={id} data-status={String(e.status)}
              class={id === c.selected ? "selected" : ""} onClick={() => void c.select(id)}>
              <td><b>{String(e.title ?? "")}</b> <code>{id.slice(0, 8)}</code></td>
              <td>{String(e.status ?? "")}</td>
              <td>{String(e.turnState ?? "")}</td>
              <td>{String(e.messageCount ?? "")}</td>
              <td>{badges(e).map((b) => <span class="badge" key={b}>{b}</span>)}</td>
            </tr>,
            ...children.map((k: Json) => {
              const child = k as Obj;
              return (
                <tr key={`${id}/${String(child.id)}`} class="child" data-testid="child"
                  data-id={String(child.id)} data-name={String(child.name ?? "")}
                  onClick={() => void c.openChild(String(child.id), String(child.name ?? ""), id)}>
                  <td style={{ paddingLeft: `${Number(child.depth ?? 1) * 1.5}em` }}>↳ {String(child.name ?? "")} <code>{String(child.id ?? "")}</code></td>
                  <td>{String(child.status ?? "")}{child.end ? ` (${String(child.end)})` : ""}</td>
                  <td>{String(child.turns ?? 0)} turns</td><td /><td />
                </tr>
              );
            }),
          ];
        })}
      </tbody>
    </table>
  );
}

function childStatus(k: Obj): string {
  return `${String(k.status ?? "")}${k.end ? ` (${String(k.end)})` : ""}`;
}

function Children({ c }: { c: Console }) {
  const rows = c.children();
  if (!rows.length && !c.child) return null;
  return (
    <div class="children" data-testid="children">
      <b>Children</b> ({rows.length})
      <ul>
        {rows.map((k) => {
          const id = String(k.id), name = String(k.name ?? "");
          return (
            <li key={id} data-testid="child-row" data-id={id} data-name={name} data-status={String(k.status ?? "")}
              class={c.child?.id === id ? "open" : ""} style={{ paddingLeft: `${(Number(k.depth ?? 1) - 1) * 1.5}em` }}>
              <b>{name}</b> <span class="badge">{childStatus(k)}</span> {String(k.turns ?? 0)} turns
              <button data-testid="open-child" onClick={() => void c.openChild(id, name)}>open</button>
              {k.status !== "ended" && (
                <button data-testid="stop-child" class="danger" onClick={() => void c.stopChild(id, name)}>stop</button>
              )}
            </li>
          );
        })}
      </ul>
      {c.child && <ChildView c={c} rows={rows} />}
    </div>
  );
}

function ChildView({ c, rows }: { c: Console; rows: Obj[] }) {
  const k = c.child!;
  const row = rows.find((r) => String(r.id) === k.id);
  const [text, setText] = useState("");
  const steer = () => { if (text.trim()) { void c.steerChild(text); setText(""); } };
  return (
    <div class="child-view" data-testid="child-view" data-id={k.id} data-name={k.name}>
      <h3>child {k.name} <span class="state">{row ? childStatus(row) : ""}</span>{" "}
        <button data-testid="read-child" onClick={() => void c.readChild()}>read again</button>
        <button data-testid="close-child" onClick={() => c.closeChild()}>close</button>
      </h3>
      {k.error && <p class="error">{k.error}</p>}
      <div class="conversation">
        {k.messages.map((m, i) => (
          <div key={i} class={`entry ${String(m.role ?? "")}`} data-testid="child-message" data-role={String(m.role ?? "")}>
            <span class="who">{String(m.role ?? "")}</span><span class="text">{String(m.text ?? "")}</span>
          </div>
        ))}
      </div>
      {row?.status !== "ended" && (
        <form class="composer" onSubmit={(ev) => { ev.preventDefault(); steer(); }}>
          <input data-testid="steer" value={text} placeholder={`a steer for ${k.name} (read at its next step)`}
            onInput={(ev) => setText((ev.target as HTMLInputElement).value)} />
          <button type="submit" data-testid="steer-send">steer</button>
        </form>
      )}
    </div>
  );
}

function Composer({ c }: { c: Console }) {
  const [text, setText] = useState("");
  const send = () => { if (text.trim()) { void c.send(text); setText(""); } };
  return (
    <form class="composer" onSubmit={(ev) => { ev.preventDefault(); send(); }}>
      <input data-testid="message" value={text} placeholder="a message (read at the agent's next step)"
        onInput={(ev) => setText((ev.target as HTMLInputElement).value)} />
      <button type="submit" data-testid="send">send</button>
      <button type="button" data-testid="interrupt" onClick={() => void c.interrupt()}>interrupt</button>
      <button type="button" data-testid="end" class="danger" onClick={() => void c.end()}>end</button>
    </form>
  );
}

/** The conversation pane: it follows its live end (each draw scrolls to it) until the operator
 * scrolls up, and again once they scroll back down to the end, as the terminal console does.
 * Following is a flag the operator's scrolling sets, not a look at the position when
 * something arrives: content that grew since the last draw is not the operator leaving. */
function Conversation({ c }: { c: Console }) {
  const pane = useRef<HTMLDivElement>(null);
  const top = useRef(0);
  useLayoutEffect(() => {
    const el = pane.current;
    if (el && c.follow && el.scrollTop + el.clientHeight < el.scrollHeight) {
      el.scrollTop = el.scrollHeight;
      top.current = el.scrollTop;
    }
  });
  const scrolled = (ev: Event) => {
    const el = ev.currentTarget as HTMLDivElement;
    const was = c.follow;
    if (el.scrollTop + el.clientHeight >= el.scrollHeight - 2) c.follow = true;
    else if (el.scrollTop < top.current) c.follow = false; // only the operator moves it up
    top.current = el.scrollTop;
    if (c.follow !== was) c.changed();
  };
  return (
    <div class="conversation" data-testid="conversation" data-follow={String(c.follow)} ref={pane} onScroll={scrolled}>
      {[...c.fold.entries.values()].map((e) => <Row key={e.key} entry={e} version={e.version} console={c} />)}
    </div>
  );
}

function Execution({ c }: { c: Console }) {
  const f = c.fold;
  if (c.selected === null) return <section class="execution"><p>No execution selected.</p></section>;
  const a = f.approval;
  return (
    <section class="execution" data-testid="execution-view" data-id={c.selected}>
      <h2>{f.title || c.selected} <span class="state" data-testid="state">{f.status} · turn {f.turn || "idle"}{f.role ? ` · ${f.role}` : ""}</span></h2>
      <Conversation c={c} />
      {a && (
        <div class="approval" data-testid="approval">
          <b>{String(a.toolCall.toolCallId ?? "").startsWith("question-") ? "The agent asks:" : "Approve?"}</b>{" "}
          {String(a.toolCall.title ?? a.toolCall.toolCallId ?? "")}
          {a.options.map((o) => (
            <button key={o.optionId} data-testid="option" data-option={o.optionId} onClick={() => a.answer(o.optionId)}>{o.name}</button>
          ))}
        </div>
      )}
      <Children c={c} />
      {f.queue.length > 0 && (
        <ul class="queue" data-testid="queue">
          {f.queue.map((q) => (
            <li key={q.id} data-testid="queued" data-id={q.id}>
              <span class="badge">queued</span> {q.text}
              <button data-testid="withdraw" onClick={() => void c.withdraw(q.id)}>withdraw</button>
            </li>
          ))}
        </ul>
      )}
      {!f.ended && <Composer c={c} />}
      {c.notice && <p class="notice" data-testid="notice">{c.notice}</p>}
    </section>
  );
}

function Page({ c }: { c: Console }) {
  if (c.fatal) return <main><h1>agent-channel</h1><p class="error" data-testid="error">{c.fatal}</p></main>;
  return (
    <main>
      <header><h1>agent-channel</h1><span data-testid="connection">{c.status}</span></header>
      <div class="panes"><Fleet c={c} /><Execution c={c} /></div>
    </main>
  );
}

const root = document.getElementById("app")!;
const consoleApp: Console = new Console(tokenOfPage(), () => render(<Page c={consoleApp} />, root));
history.replaceState(null, "", location.pathname); // the token leaves the address bar
render(<Page c={consoleApp} />, root);
void consoleApp.start();
