//! The kubectl tools: `exec_kubectl_cmd_safely`, `rollback_command` and
//! `get_previous_rollbackable_cmd`.
//!
//! A command line goes through [`crate::command::check`] (refused, or classified). A read runs
//! as given. A write runs first as a server dry run; if the server refuses it, its message comes
//! back and nothing changes. Otherwise the write's targets are read as they are now (from the
//! dry run's output, or from the command's own arguments), the write runs, and the steps that
//! put the targets back are pushed on the server's rollback stack. `rollback_command` pops and
//! runs the last entry.
//!
//! Writes are serialised: the state saved before one write must not be another's half-done
//! change.

use std::sync::{Arc, Mutex};

use crate::command::{self, Checked, Effect, Targets};
use crate::run::{Kubectl, Ran};
use crate::undo::{self, Rollback, Undo};

/// kubectl as a tool: the runner and the rollback stack shared by every session of a server.
#[derive(Debug, Clone)]
pub struct KubectlTools {
    runner: Kubectl,
    stack: Arc<Mutex<Vec<Rollback>>>,
    writing: Arc<tokio::sync::Mutex<()>>,
}

/// The saved state of a write's targets, and what the dry run showed.
struct Plan {
    steps: Vec<Undo>,
    /// Why (part of) the write cannot be undone, for the agent.
    notes: Vec<String>,
    /// The dry run left every target as it was.
    no_effect: bool,
}

impl KubectlTools {
    pub fn new(runner: Kubectl) -> Self {
        KubectlTools {
            runner,
            stack: Arc::default(),
            writing: Arc::default(),
        }
    }

    /// The same kubectl with a rollback stack of its own (SREGym keeps one per client session);
    /// writes stay serialised with every other stack's.
    pub fn with_own_stack(&self) -> Self {
        KubectlTools {
            runner: self.runner.clone(),
            stack: Arc::default(),
            writing: self.writing.clone(),
        }
    }

    /// The command lines on the rollback stack, oldest first.
    pub fn rollbackable_cmds(&self) -> Vec<String> {
        self.stack().iter().map(|r| r.cmd.clone()).collect()
    }

    /// Checks and runs one command line; the tool's answer, or its error text.
    pub async fn exec(&self, line: &str) -> Result<String, String> {
        let checked = command::check(line).map_err(|e| format!("Refused: {e}"))?;
        match checked.effect {
            Effect::Read => answer(self.run(&checked.args, None).await?),
            Effect::DryRunnable | Effect::NoDryRun => {
                let _one_at_a_time = self.writing.lock().await;
                self.write(line, &checked).await
            }
        }
    }

    async fn write(&self, line: &str, checked: &Checked) -> Result<String, String> {
        let dry = if checked.effect == Effect::DryRunnable {
            let dry = self.run(&checked.dry_run_args(), None).await?;
            if !dry.success() {
                return Err(format!(
                    "The server dry run failed, so the command was not run:\n{}",
                    dry.text()
                ));
            }
            Some(dry)
        } else {
            None
        };
        let plan = self.plan(checked, dry.as_ref()).await;
        if plan.no_effect {
            return Ok(format!(
                "No effect: the server dry run shows `{line}` would change nothing, so it was not run."
            ));
        }
        let ran = self.run(&checked.args, None).await?;
        if !ran.success() {
            return Err(ran.text());
        }
        let mut text = ran.text();
        if plan.steps.is_empty() {
            text.push_str("\n[this command cannot be rolled back");
        } else {
            text.push_str("\n[rollback saved: ");
            let steps: Vec<String> = plan.steps.iter().map(Undo::describe).collect();
            text.push_str(&steps.join("; "));
            self.stack().push(Rollback {
                cmd: line.trim().to_string(),
                steps: plan.steps,
            });
        }
        for note in &plan.notes {
            text.push_str("; ");
            text.push_str(note);
        }
        text.push(']');
        Ok(text)
    }

    /// Reads the write's targets before it runs and works out how to undo it.
    async fn plan(&self, checked: &Checked, dry: Option<&Ran>) -> Plan {
        let mut plan = Plan {
            steps: Vec::new(),
            notes: Vec::new(),
            no_effect: false,
        };
        let result = match (checked.targets, dry) {
            (Targets::DryRunJson, Some(dry)) => self.plan_changed(&dry.stdout, &mut plan).await,
            (Targets::DryRunNames, Some(dry)) => {
                self.plan_deleted(checked, &dry.stdout, &mut plan).await
            }
            (Targets::Nodes, _) => {
                let refs: Vec<String> = checked
                    .node_names()
                    .into_iter()
                    .map(|n| format!("node/{n}"))
                    .collect();
                self.plan_restored(&refs, &[], &mut plan).await
            }
            (Targets::ResourceArgs, _) => {
                self.plan_restored(&checked.positionals, &checked.namespace_args(), &mut plan)
                    .await
            }
            _ => Ok(()),
        };
        if let Err(e) = result {
            plan.steps.clear();
            plan.no_effect = false;
            plan.notes
                .push(format!("its targets could not be read: {e}"));
        }
        plan
    }

    /// Targets printed by the dry run (`-o json`): each is restored if it exists now, deleted
    /// if the write creates it.
    async fn plan_changed(&self, dry_out: &str, plan: &mut Plan) -> Result<(), String> {
        let after = undo::objects(dry_out)?;
        let mut all_unchanged = !after.is_empty();
        for obj in &after {
            let reference = undo::reference_of(obj)
                .ok_or("an object in the dry run has no kind, apiVersion or name")?;
            let namespace = undo::namespace_of(obj);
            let mut args = vec!["get".to_string(), reference.clone()];
            if let Some(ns) = &namespace {
                args.extend(["-n".to_string(), ns.clone()]);
            }
            args.extend(["-o", "json", "--ignore-not-found"].map(String::from));
            let now = self.run(&args, None).await?;
            if !now.success() {
                return Err(now.text());
            }
            match undo::objects(&now.stdout)?.into_iter().next() {
                Some(live) => {
                    all_unchanged &= undo::unchanged(&live, obj);
                    plan.steps.push(Undo::Replace(undo::for_replace(&live)));
                }
                None => {
                    all_unchanged = false;
                    plan.steps.push(Undo::Delete {
                        reference,
                        namespace,
                    });
                }
            }
        }
        plan.no_effect = all_unchanged;
        Ok(())
    }

    /// Targets a delete names (`-o name`): each is created again, unless a controller will.
    async fn plan_deleted(
        &self,
        checked: &Checked,
        dry_out: &str,
        plan: &mut Plan,
    ) -> Result<(), String> {
        if checked.all_namespaces {
            plan.notes
                .push("a delete across all namespaces is not saved for rollback".into());
            return Ok(());
        }
        let refs: Vec<String> = dry_out
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        if refs.is_empty() {
            return Ok(());
        }
        let mut args = vec!["get".to_string()];
        args.extend(refs);
        args.extend(checked.namespace_args());
        args.extend(["-o", "json", "--ignore-not-found"].map(String::from));
        let now = self.run(&args, None).await?;
        if !now.success() {
            return Err(now.text());
        }
        for obj in undo::objects(&now.stdout)? {
            if undo::has_controller(&obj) {
                let name = undo::reference_of(&obj).unwrap_or_default();
                plan.notes.push(format!(
                    "{name} is re-created by its controller, not by a rollback"
                ));
            } else {
                plan.steps.push(Undo::Create(undo::for_create(&obj)));
            }
        }
        Ok(())
    }

    /// Targets named by the command's own arguments: each is restored as it is now.
    async fn plan_restored(
        &self,
        refs: &[String],
        scope: &[String],
        plan: &mut Plan,
    ) -> Result<(), String> {
        if refs.is_empty() {
            plan.notes
                .push("its targets are chosen by selector and are not saved".into());
            return Ok(());
        }
        let mut args = vec!["get".to_string()];
        args.extend(refs.iter().cloned());
        args.extend(scope.iter().cloned());
        args.extend(["-o", "json"].map(String::from));
        let now = self.run(&args, None).await?;
        if !now.success() {
            return Err(now.text());
        }
        for obj in undo::objects(&now.stdout)? {
            plan.steps.push(Undo::Replace(undo::for_replace(&obj)));
        }
        Ok(())
    }

    /// Undoes the last saved write.
    pub async fn rollback(&self) -> Result<String, String> {
        let _one_at_a_time = self.writing.lock().await;
        let Some(last) = self.stack().pop() else {
            return Ok("There is no command to roll back.".into());
        };
        let mut report = vec![format!("Rolled back `{}`:", last.cmd)];
        let mut failed = false;
        for step in &last.steps {
            match self.undo(step).await {
                Ok(()) => report.push(format!("- {}: done", step.describe())),
                Err(e) => {
                    failed = true;
                    report.push(format!("- {}: failed: {}", step.describe(), e.trim()));
                }
            }
        }
        let report = report.join("\n");
        if failed { Err(report) } else { Ok(report) }
    }

    async fn undo(&self, step: &Undo) -> Result<(), String> {
        let (args, input) = match step {
            Undo::Replace(obj) => (vec!["replace", "-f", "-"], Some(obj)),
            Undo::Create(obj) => (vec!["create", "-f", "-"], Some(obj)),
            Undo::Delete { .. } => (vec!["delete"], None),
        };
        let mut args: Vec<String> = args.into_iter().map(String::from).collect();
        if let Undo::Delete {
            reference,
            namespace,
        } = step
        {
            args.push(reference.clone());
            if let Some(ns) = namespace {
                args.extend(["-n".to_string(), ns.clone()]);
            }
            // What was created may have gone since; waiting on finalizers is not the undo's job.
            args.extend(["--ignore-not-found", "--wait=false"].map(String::from));
        }
        let input = input.map(|obj| obj.to_string().into_bytes());
        let ran = self.run(&args, input.as_deref()).await?;
        // The object was deleted since it was saved: create it instead.
        if !ran.success()
            && let Undo::Replace(obj) = step
            && ran.stderr.contains("NotFound")
        {
            let again = self
                .run(
                    &["create", "-f", "-"].map(String::from),
                    Some(undo::for_create(obj).to_string().as_bytes()),
                )
                .await?;
            return if again.success() {
                Ok(())
            } else {
                Err(again.text())
            };
        }
        if ran.success() {
            Ok(())
        } else {
            Err(ran.text())
        }
    }

    /// The saved writes, oldest first; the last is the one `rollback_command` undoes.
    pub fn rollbackable(&self) -> String {
        let stack = self.stack();
        if stack.is_empty() {
            return "No rollbackable commands.".into();
        }
        let mut text = String::from("Rollbackable commands (the last is undone first):\n");
        for (i, entry) in stack.iter().enumerate() {
            let steps: Vec<String> = entry.steps.iter().map(Undo::describe).collect();
            text.push_str(&format!(
                "{}. {} (undo: {})\n",
                i + 1,
                entry.cmd,
                steps.join("; ")
            ));
        }
        text
    }

    fn stack(&self) -> std::sync::MutexGuard<'_, Vec<Rollback>> {
        // A panic elsewhere while the stack was held leaves it whole (pushes and pops are
        // single calls), so a poisoned lock is still good to use.
        self.stack.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn run(&self, args: &[String], stdin: Option<&[u8]>) -> Result<Ran, String> {
        self.runner
            .run(args, stdin)
            .await
            .map_err(|e| e.to_string())
    }
}

/// A finished kubectl run as a tool answer: a failure is the tool's error.
fn answer(ran: Ran) -> Result<String, String> {
    if ran.success() {
        Ok(ran.text())
    } else {
        Err(ran.text())
    }
}
