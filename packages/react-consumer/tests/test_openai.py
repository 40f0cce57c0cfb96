"""The OpenAI-compatible adapter over real HTTP, against a local fake server."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import anyio
import anyio.to_thread
import pytest
from agent_channel import (
    AgentRef,
    ChatMessageTool,
    ChatMessageUser,
    ContentImage,
    ContentResource,
    ContentText,
    UserMessage,
    open_channel,
)
from agent_channel_react import AgentState, react
from agent_channel_react._openai import ModelError, OpenAIModel

from .fake_openai import FakeServer, Planned, chunk, serve, usage_chunk
from .helpers import Recorder, add, drive

pytestmark = pytest.mark.anyio


@pytest.fixture
def server() -> Iterator[FakeServer]:
    state, httpd = serve()
    yield state
    httpd.shutdown()
    httpd.server_close()


def _model(server: FakeServer) -> OpenAIModel:
    return OpenAIModel("fake-model", base_url=server.url, api_key="test", max_retries=0)


def _input(content: str = "Hi.") -> AgentState:
    return AgentState(messages=[ChatMessageUser(content=content)])


async def test_streams_text_deltas_and_usage(server: FakeServer) -> None:
    server.plan.append(
        Planned(
            [
                chunk(reasoning="Hmm. "),
                chunk("Hel"),
                chunk("lo"),
                chunk(" world"),
                chunk(finish="stop"),
                usage_chunk(12, 3),
            ]
        )
    )
    rec = Recorder()
    async with open_channel() as ch:
        ch.ref().subscribe(rec)
        state = await react(model=_model(server), submit=False, prompt="Be nice.")(_input())
    message = state.messages[-1]
    assert message.text == "Hello world"
    deltas = rec.of("model_delta")
    assert [(d.kind, d.text) for d in deltas] == [
        ("reasoning", "Hmm. "),
        ("text", "Hel"),
        ("text", "lo"),
        ("text", " world"),
    ]
    assert {d.message_id for d in deltas} == {message.id}
    usage = rec.of("model_call_finished")[0].usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (12, 3, 15)
    request = server.requests[0]
    assert request["model"] == "fake-model" and request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    assert request["messages"] == [
        {"role": "system", "content": "Be nice."},
        {"role": "user", "content": "Hi."},
    ]


async def test_tool_calls_are_assembled_from_fragments_and_answered(server: FakeServer) -> None:
    first = {"index": 0, "id": "call_a", "function": {"name": "add", "arguments": '{"a": 1,'}}
    rest = {"index": 0, "function": {"arguments": ' "b": 2}'}}
    server.plan += [
        Planned([chunk(tool_calls=[first]), chunk(tool_calls=[rest]), chunk(finish="tool_calls")]),
        Planned([chunk("It is 3."), chunk(finish="stop")]),
    ]
    state = await react(model=_model(server), tools=[add], submit=False)(_input("1+2?"))
    result = next(m for m in state.messages if isinstance(m, ChatMessageTool))
    assert (result.tool_call_id, result.text) == ("call_a", "3")
    assert state.messages[-1].text == "It is 3."
    tools = server.requests[0]["tools"]
    assert tools[0]["function"]["name"] == "add"
    assert tools[0]["function"]["parameters"]["required"] == ["a", "b"]
    sent = server.requests[1]["messages"]
    assert sent[-2]["tool_calls"] == [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
        }
    ]
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_a", "content": "3"}


async def test_images_and_resources_become_content_parts(server: FakeServer) -> None:
    server.plan.append(Planned([chunk("Seen."), chunk(finish="stop")]))
    content = (
        ContentText(text="Look:"),
        ContentImage(mime_type="image/png", data="iVBORw0KGgo="),
        ContentResource(uri="file:///notes.txt", text="the notes", mime_type="text/plain"),
    )
    state = AgentState(messages=[ChatMessageUser(content=content)])
    await react(model=_model(server), submit=False, prompt=None)(state)
    assert server.requests[0]["messages"][0]["content"] == [
        {"type": "text", "text": "Look:"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "text", "text": '<resource uri="file:///notes.txt">\nthe notes\n</resource>'},
    ]


async def test_a_stream_cut_off_midway_is_an_error_and_nothing_partial_lands(
    server: FakeServer,
) -> None:
    server.plan.append(Planned([chunk("Half an ans")], ending="cut"))
    rec = Recorder()
    state = _input()
    with pytest.raises(ModelError, match="ended before"):
        async with open_channel() as ch:
            ch.ref().subscribe(rec)
            await react(model=_model(server), submit=False)(state)
    assert [m.role for m in state.messages] == ["system", "user"]
    finished = rec.of("model_call_finished")[0]
    assert finished.message is None and "ended before" in (finished.error or "")
    assert rec.of("execution_finished")[0].error is not None


async def test_an_interrupted_stream_closes_the_http_request(server: FakeServer) -> None:
    server.plan += [
        Planned([chunk("Working on a long ")], ending="hang"),
        Planned([chunk("Short answer."), chunk(finish="stop")]),
    ]

    async def producer(ref: AgentRef, rec: Recorder) -> None:
        await rec.seen("model_delta")
        ref.interrupt()
        ref.post(UserMessage("Shorter, please."))

    agent = react(model=_model(server), submit=False)
    state, rec = await drive(agent, _input(), producer)
    closed = await anyio.to_thread.run_sync(server.disconnected.wait, 30)
    assert closed, "the server never saw the client disconnect"
    assert [m.text for m in state.messages[1:]] == ["Hi.", "Shorter, please.", "Short answer."]
    assert rec.of("model_call_finished")[0].cancelled
    assert server.requests[1]["messages"][-1] == {"role": "user", "content": "Shorter, please."}


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("AGENT_CHANNEL_MODEL", "llama3")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIModel()
    assert model.name == "llama3"
    assert str(model.client.base_url).rstrip("/") == "http://127.0.0.1:9/v1"


def test_the_adapter_is_public_and_importing_the_package_does_not_import_openai() -> None:
    probe = (
        "import sys, agent_channel_react as r\n"
        "assert 'openai' not in sys.modules, 'openai imported by the package'\n"
        "assert {'OpenAIModel', 'ModelError'} <= set(r.__all__)\n"
        "from agent_channel_react import ModelError, OpenAIModel\n"
        "assert 'openai' in sys.modules\n"
        "from agent_channel_react._openai import ModelError as E, OpenAIModel as M\n"
        "assert (OpenAIModel, ModelError) == (M, E)\n"
        "try:\n"
        "    r.NoSuchThing\n"
        "except AttributeError as e:\n"
        "    assert 'NoSuchThing' in str(e)\n"
        "else:\n"
        "    raise AssertionError('unknown names must raise AttributeError')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_without_the_openai_extra_the_adapter_names_the_extra_to_install() -> None:
    probe = (
        "import sys\n"
        "sys.modules['openai'] = None  # as if it were not installed\n"
        "import agent_channel_react\n"
        "try:\n"
        "    from agent_channel_react import OpenAIModel\n"
        "except ImportError as e:\n"
        "    assert \"'./packages/react-consumer[openai]'\" in str(e), str(e)\n"
        "else:\n"
        "    raise AssertionError('imported without openai')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_a_server_that_cannot_be_reached_is_named_in_one_clear_error() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    model = OpenAIModel("fake-model", base_url=url, api_key="test", max_retries=0)
    rec = Recorder()
    with pytest.raises(ModelError) as caught:
        async with open_channel() as ch:
            ch.ref().subscribe(rec)
            await react(model=model, submit=False)(_input())
    message = str(caught.value)
    assert message.startswith(f"cannot reach the model server at {url}: "), message
    assert len(message) > len(f"cannot reach the model server at {url}: ")  # and why
    assert message in (rec.of("model_call_finished")[0].error or "")
