"""The agent's local memory of the commands it has taken on: a small JSON file that survives restarts.

It dedupes even while DynamoDB is unreachable, and it remembers a command is running *before*
it runs, so an agent killed mid-command does not run it again after a restart. Each entry:
  {"status": "running" | "done" | "duplicate", "at": iso, "message_id": ..., "result": {...} | null,
   "reported": bool}
Written atomically (temp file, fsync, rename). Old entries are pruned.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from datetime import datetime, timedelta
from typing import Any

KEEP_FOR = timedelta(days=8)  # longer than the ledger keeps results and SQS keeps messages
MAX_ENTRIES = 5000

log = logging.getLogger("medic_agent.state")


class State:
    def __init__(self, path: str) -> None:
        self.path = path
        self.commands: dict[str, dict[str, Any]] = {}
        self.messages: dict[str, str] = {}  # SQS message id -> command id ("" when it had none)
        self._load()

    def _load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as handle:
                data = json.load(handle)
            commands, messages = data.get("commands", {}), data.get("messages", {})
            if not isinstance(commands, dict) or not isinstance(messages, dict):
                raise ValueError("commands and messages must be objects")
        except FileNotFoundError:
            return
        except (OSError, ValueError, AttributeError) as error:
            # Keep the bad file for a human; the ledger's claims still prevent a second run.
            aside = f"{self.path}.corrupt-{int(datetime.now().timestamp())}"
            log.error("state file unreadable, starting empty", extra={"fields": {"path": self.path, "error": str(error),
                                                                                  "moved_to": aside}})
            try:
                os.replace(self.path, aside)
            except OSError:
                pass
            return
        self.commands = {key: value for key, value in commands.items() if isinstance(value, dict)}
        self.messages = {key: value for key, value in messages.items() if isinstance(value, str)}

    def get(self, command_id: str) -> dict[str, Any] | None:
        return self.commands.get(command_id)

    def command_for_message(self, message_id: str) -> str | None:
        return self.messages.get(message_id)

    def put(self, command_id: str, now: datetime, **fields: Any) -> None:
        entry = self.commands.setdefault(command_id, {"at": now.isoformat(), "result": None, "reported": False})
        entry.update(fields)
        self.save(now)

    def forget(self, command_id: str, now: datetime) -> None:
        self.commands.pop(command_id, None)
        self.messages = {key: value for key, value in self.messages.items() if value != command_id}
        self.save(now)

    def remember_message(self, message_id: str, command_id: str, now: datetime) -> None:
        self.messages[message_id] = command_id
        self.save(now)

    def _prune(self, now: datetime) -> None:
        cutoff = (now - KEEP_FOR).isoformat()
        # Keep what is still running or not yet reported, however old: it still needs finishing.
        keep = {key: value for key, value in self.commands.items()
                if str(value.get("at", "")) >= cutoff or value.get("status") == "running" or not value.get("reported")}
        if len(keep) > MAX_ENTRIES:
            newest = sorted(keep, key=lambda key: str(keep[key].get("at", "")))[-MAX_ENTRIES:]
            keep = {key: keep[key] for key in newest}
        self.commands = keep
        self.messages = {key: value for key, value in self.messages.items() if value == "" or value in keep}
        if len(self.messages) > MAX_ENTRIES:
            self.messages = dict(list(self.messages.items())[-MAX_ENTRIES:])

    def save(self, now: datetime) -> None:
        self._prune(now)
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, mode=0o700, exist_ok=True)
        handle, temp = tempfile.mkstemp(prefix=".state-", dir=directory)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump({"version": 1, "commands": self.commands, "messages": self.messages}, out, sort_keys=True)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, self.path)
        except BaseException:
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise
