"""Scripted Harbor agents for the Harbor tests (tests/e2e/harbor_tasks.rs), run by the real
`harbor run -a scripted_agents:Name` with this directory on PYTHONPATH. Each works inside the task's
environment as the task's unprivileged user, through `environment.exec`, as an installed agent's
commands do.

- KubectlFixer (`--ak fixes=DIR`): submits the diagnosis in DIR/<task>.txt through the submission
  API, runs the kubectl lines of DIR/<task>.sh, and submits the mitigation: a scripted SRE.
- Snoop: tries every way an agent might read the answers (the episode file, the daemon's process,
  its log, the run directory, the control API without tokens, its own environment) and keeps all it
  saw in /logs/agent/snoop.txt for the test to search.
"""

from pathlib import Path

from harbor.agents.base import BaseAgent
from harbor.agents.capabilities import AgentCapabilities
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

SUBMIT = """submit() {
  curl -sf -X POST "$FAULTLINE_SUBMIT_URL/submit" -H 'Content-Type: application/json' \
    -d "$(jq -n --arg s "$1" '{solution: $s}')"; echo
}
"""

WAIT_FOR_MITIGATION = """until curl -sf "$FAULTLINE_SUBMIT_URL/status" | grep -q '"mitigation"'; do sleep 0.1; done
"""

SNOOP = r"""
exec > /logs/agent/snoop.txt 2>&1
echo "== id"; id
echo "== env"; env
echo "== episode file"; cat /etc/faultline/episode.json
ls -la /etc/faultline /var/lib/faultline /var/lib/faultline/run /run/faultline
cat /run/faultline/daemon.log /run/faultline/daemon.pid
echo "== processes"; ps -eo pid,user,args
for p in /proc/[0-9]*; do
  echo "-- $p: $(tr '\0' ' ' < "$p/cmdline" 2>&1)"
  tr '\0' '\n' < "$p/environ" 2>&1 | head -50
  ls -l "$p/cwd" "$p/exe" 2>&1
  ls "$p/fd" 2>&1 | head -5
done
echo "== files named like answers"
find / -xdev \( -name '*ground_truth*' -o -name 'episode*' -o -name 'run.json' \) 2>/dev/null
find /tmp /var/tmp /home -maxdepth 3 -type f 2>/dev/null | head -50
for f in $(find /tmp -maxdepth 3 -type f 2>/dev/null | head -20); do echo "-- $f"; head -c 2000 "$f" 2>&1; done
echo "== control API without a token"
curl -s -X POST http://127.0.0.1:7078/solve; echo
curl -s -X POST http://127.0.0.1:7078/grade -H 'Authorization: Bearer guess'; echo
echo "== the app"; curl -s "$FAULTLINE_SUBMIT_URL/get_app"; echo
echo "== done"
"""


class Scripted(BaseAgent):
    """What both agents share: no setup, and the MCP capability Harbor requires of an agent on a
    task that offers the session's MCP server."""

    capabilities = AgentCapabilities(mcp_servers=True)

    def version(self) -> str:
        return "1.0.0"

    async def setup(self, environment: BaseEnvironment) -> None:
        pass


class KubectlFixer(Scripted):
    def __init__(self, *args, fixes: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.fixes = Path(fixes)

    @staticmethod
    def name() -> str:
        return "faultline-kubectl-fixer"

    async def run(self, instruction: str, environment: BaseEnvironment,
                  context: AgentContext) -> None:
        task = environment.environment_name
        diagnosis = (self.fixes / f"{task}.txt").read_text()
        fix = (self.fixes / f"{task}.sh").read_text()
        script = SUBMIT + 'submit "$DIAGNOSIS"\n' + WAIT_FOR_MITIGATION + fix + '\nsubmit ""\n'
        result = await environment.exec(script, env={"DIAGNOSIS": diagnosis}, user="agent")
        (self.logs_dir / "fixer.txt").write_text(
            f"exit {result.return_code}\n{result.stdout}\n{result.stderr}")


class Snoop(Scripted):
    @staticmethod
    def name() -> str:
        return "faultline-snoop"

    async def run(self, instruction: str, environment: BaseEnvironment,
                  context: AgentContext) -> None:
        await environment.exec(SNOOP, user="agent", timeout_sec=120)
