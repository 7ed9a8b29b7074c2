//! The stages of a session, SREGym's protocol: the agent diagnoses and submits a diagnosis, then
//! mitigates and submits again; a replay session has the diagnosis stage only. IO-free: the
//! submission API asks it what the stage is and whether a submission is accepted.
//!
//! As SREGym's conductor does, a stage followed by another stays open while its submission is
//! evaluated (`GET /status` still names it) and the next opens once it is; a submission made
//! meanwhile is a duplicate of the one being evaluated and is ignored.

/// A stage as `GET /status` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Setup,
    Diagnosis,
    Mitigation,
    TearingDown,
    Done,
}

impl Stage {
    /// The stage as `GET /status` names it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Setup => "setup",
            Stage::Diagnosis => "diagnosis",
            Stage::Mitigation => "mitigation",
            Stage::TearingDown => "tearing_down",
            Stage::Done => "done",
        }
    }
}

impl serde::Serialize for Stage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// Where a session is in its protocol.
#[derive(Debug, Clone)]
pub struct Progress {
    /// The stages the agent works through, in order.
    plan: Vec<Stage>,
    /// Index into `plan` of the open stage; `plan.len()` once every stage was submitted.
    next: usize,
    /// False until the agent has been started.
    started: bool,
    /// Set when the session is ending for another reason (time limit, agent gone, interrupt).
    tearing_down: bool,
    /// The open stage's submission is being evaluated; the next stage opens when it is.
    evaluating: bool,
}

/// Why a submission was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("every stage has been submitted")]
    Done,
    #[error("no stage is open for submissions (the session is {0})")]
    Closed(&'static str),
    #[error("the {0} submission is being evaluated; this one is a duplicate")]
    Duplicate(&'static str),
}

impl Progress {
    /// A live session: diagnosis, then mitigation. A replay: diagnosis only.
    pub fn new(mitigation: bool) -> Progress {
        let mut plan = vec![Stage::Diagnosis];
        if mitigation {
            plan.push(Stage::Mitigation);
        }
        Progress {
            plan,
            next: 0,
            started: false,
            tearing_down: false,
            evaluating: false,
        }
    }

    pub fn start(&mut self) {
        self.started = true;
    }

    pub fn tear_down(&mut self) {
        self.tearing_down = true;
    }

    pub fn stage(&self) -> Stage {
        if self.next >= self.plan.len() {
            Stage::Done
        } else if self.tearing_down {
            Stage::TearingDown
        } else if !self.started {
            Stage::Setup
        } else {
            self.plan[self.next]
        }
    }

    /// Takes a submission for the open stage; returns that stage. The last stage closes at
    /// once; an earlier one stays open until [`Progress::evaluated`].
    pub fn submit(&mut self) -> Result<Stage, Refusal> {
        match self.stage() {
            Stage::Done => Err(Refusal::Done),
            Stage::Setup => Err(Refusal::Closed("setting up")),
            Stage::TearingDown => Err(Refusal::Closed("tearing down")),
            stage if self.evaluating => Err(Refusal::Duplicate(stage.name())),
            stage => {
                if self.next + 1 < self.plan.len() {
                    self.evaluating = true;
                } else {
                    self.next += 1;
                }
                Ok(stage)
            }
        }
    }

    /// The open stage's submission has been evaluated: the next stage opens.
    pub fn evaluated(&mut self) {
        if self.evaluating {
            self.evaluating = false;
            self.next += 1;
        }
    }

    /// Whether the open stage's submission is being evaluated (the next stage not yet open).
    pub fn evaluating(&self) -> bool {
        self.evaluating && self.stage() != Stage::TearingDown
    }

    /// Every stage has been submitted.
    pub fn finished(&self) -> bool {
        self.next >= self.plan.len()
    }

    /// Whether this session has a mitigation stage.
    pub fn mitigates(&self) -> bool {
        self.plan.contains(&Stage::Mitigation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_session_takes_a_diagnosis_then_a_mitigation_then_nothing() {
        let mut p = Progress::new(true);
        assert_eq!(p.stage(), Stage::Setup);
        assert_eq!(p.submit(), Err(Refusal::Closed("setting up")));
        p.start();
        assert_eq!(p.stage(), Stage::Diagnosis);
        assert_eq!(p.submit(), Ok(Stage::Diagnosis));
        // Evaluated before the next stage opens; a submission meanwhile is a duplicate.
        assert_eq!(p.stage(), Stage::Diagnosis);
        assert_eq!(p.submit(), Err(Refusal::Duplicate("diagnosis")));
        p.evaluated();
        assert_eq!(p.stage(), Stage::Mitigation);
        assert!(!p.finished());
        assert_eq!(p.submit(), Ok(Stage::Mitigation));
        assert_eq!(p.stage(), Stage::Done);
        assert!(p.finished());
        assert_eq!(p.submit(), Err(Refusal::Done));
    }

    #[test]
    fn a_replay_session_is_done_after_its_diagnosis_and_a_closing_session_refuses() {
        let mut p = Progress::new(false);
        p.start();
        assert_eq!(p.submit(), Ok(Stage::Diagnosis));
        assert_eq!(p.stage(), Stage::Done);
        assert!(!p.mitigates());

        let mut p = Progress::new(true);
        p.start();
        p.tear_down();
        assert_eq!(p.stage(), Stage::TearingDown);
        assert_eq!(p.submit(), Err(Refusal::Closed("tearing down")));
    }
}
