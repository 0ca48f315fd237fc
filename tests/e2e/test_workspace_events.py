"""workspace.changed: subscribed clients hear of workspaces added, reconfigured
(options or root) and removed (the real daemon, over its socket)."""

from __future__ import annotations

from autodoc.rpc import schemas
from autodoc_client import Client

NO_MODEL = {"embedding": {"provider": "none"}}


async def test_workspace_changes_are_pushed(short_tmp, daemon_factory):
    store, sock = short_tmp / "s" / "a.db", short_tmp / "d.sock"
    (short_tmp / "kb").mkdir()
    (short_tmp / "kb" / "a.md").write_text("# A\n\nalpha\n")
    d = daemon_factory(short_tmp, store=store, sock=sock, timeout=30)
    try:
        async with await Client.connect_socket(sock) as c:
            await c.call("changes.subscribe", [])
            await c.call("workspace.add", {"name": "kb", "root": str(short_tmp / "kb"), "config": NO_MODEL})
            n = await c.next_notification("workspace.changed", timeout=20)
            assert n.params["op"] == "added" and n.params["workspace"] == "kb"
            assert n.params["root"] == str((short_tmp / "kb").resolve())
            await c.call("workspace.section_size", ["kb", 200])
            n = await c.next_notification("workspace.changed", timeout=20)
            assert n.params["op"] == "configured" and n.params["config"]["section_tokens"] == 200
            assert schemas.notification_errors("workspace.changed", n.params) == []
            # the folder moved: a client showing the root learns the new one
            (short_tmp / "kb").rename(short_tmp / "moved")
            await c.call("workspace.configure", {"workspace": "kb", "root": str(short_tmp / "moved")})
            n = await c.next_notification("workspace.changed", timeout=20)
            assert n.params["op"] == "configured" and n.params["root"] == str((short_tmp / "moved").resolve())
            assert schemas.notification_errors("workspace.changed", n.params) == []
            await c.call("workspace.remove", ["kb"])
            n = await c.next_notification("workspace.changed", timeout=20)
            assert n.params == {"workspace": "kb", "op": "removed", "config": None, "root": None}
            await c.call("server.shutdown", {})
        d.wait(timeout=30)
    finally:
        d.close()
