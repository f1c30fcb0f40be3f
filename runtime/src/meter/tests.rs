//! The meter against a model written the plain way: budgets as a sum over a list of costs, rate limits as token
//! buckets counted in nanoseconds (the bucket holds `runs × interval`, a run takes one interval, and it refills
//! one nanosecond per nanosecond), over random run sequences and clock advances.

use super::*;
use crate::id::ActionId;
use crate::pattern::Pattern;
use proptest::prelude::*;

const ACTIONS: [&str; 3] = ["fs.read", "fs.write", "llm.model.chat"];

#[derive(Debug, Clone)]
enum Op {
    /// Let this many milliseconds pass.
    Advance(u64),
    /// Ask to run `ACTIONS[i]`, approved or not; if it passes it ends at once costing this much.
    Run { action: usize, approved: bool, cost: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u64..400).prop_map(Op::Advance),
        (0..ACTIONS.len(), any::<bool>(), 0u8..6).prop_map(|(action, approved, cost)| Op::Run {
            action,
            approved,
            cost
        }),
    ]
}

fn policy() -> impl Strategy<Value = Policy> {
    let budget = (prop::sample::select(vec!["**", "fs.*", "llm.**"]), 1u8..20, 1u64..2000, any::<bool>()).prop_map(
        |(actions, limit, window, ask)| Budget {
            actions: Pattern::new(actions).expect("a valid pattern"),
            limit: f64::from(limit),
            window: Duration::from_millis(window),
            when_spent: if ask { WhenSpent::Ask } else { WhenSpent::Refuse },
        },
    );
    let rate = (prop::sample::select(vec!["**", "fs.write", "fs.*"]), 1u32..5, 1u64..1500, any::<bool>()).prop_map(
        |(actions, runs, per, queue)| RateLimit {
            actions: Pattern::new(actions).expect("a valid pattern"),
            runs: NonZeroU32::new(runs).expect("runs start at 1"),
            per: Duration::from_millis(per),
            when_limited: if queue { WhenLimited::Queue } else { WhenLimited::Refuse },
        },
    );
    (prop::collection::vec(budget, 0..3), prop::collection::vec(rate, 0..3)).prop_map(|(budgets, rate_limits)| Policy {
        budgets,
        rate_limits,
        ..Policy::default()
    })
}

/// The model's verdict, without the messages.
#[derive(Debug, PartialEq)]
enum Verdict {
    Pass,
    Ask,
    Refuse(crate::action::ErrorClass),
    Wait(Duration),
}

fn verdict(metered: Metered) -> Verdict {
    match metered {
        Metered::Pass => Verdict::Pass,
        Metered::Ask(_) => Verdict::Ask,
        Metered::Refuse(error) => Verdict::Refuse(error.class()),
        Metered::Wait(wait) => Verdict::Wait(wait),
    }
}

struct Model {
    costs: Vec<(u64, usize, f64)>,
    /// Per rate limit: its level in nanoseconds, and when it was last filled (`None`: full, never used).
    buckets: Vec<Option<(u64, u64)>>,
}

impl Model {
    fn admit(&mut self, policy: &Policy, action: usize, now: u64, approved: bool) -> Verdict {
        let name = ACTIONS[action];
        for budget in policy.budgets.iter().filter(|b| b.actions.matches(name)) {
            let window = budget.window.as_nanos() as u64;
            let spent: f64 = self
                .costs
                .iter()
                .filter(|(at, a, _)| *at + window > now && budget.actions.matches(ACTIONS[*a]))
                .map(|(_, _, c)| c)
                .sum();
            if spent >= budget.limit {
                match (budget.when_spent, approved) {
                    (WhenSpent::Refuse, _) => return Verdict::Refuse(crate::action::ErrorClass::BudgetExceeded),
                    (WhenSpent::Ask, false) => return Verdict::Ask,
                    (WhenSpent::Ask, true) => {}
                }
            }
        }
        let Some(i) = policy.rate_limits.iter().position(|r| r.actions.matches(name)) else { return Verdict::Pass };
        let rule = &policy.rate_limits[i];
        let interval = (rule.per.as_nanos() as u64 / u64::from(rule.runs.get())).max(1);
        let capacity = interval * u64::from(rule.runs.get());
        let level = match self.buckets[i] {
            None => capacity,
            Some((level, at)) => (level + (now - at)).min(capacity),
        };
        if level >= interval {
            self.buckets[i] = Some((level - interval, now));
            Verdict::Pass
        } else {
            self.buckets[i] = Some((level, now));
            match rule.when_limited {
                WhenLimited::Queue => Verdict::Wait(Duration::from_nanos(interval - level)),
                WhenLimited::Refuse => Verdict::Refuse(crate::action::ErrorClass::RateLimited),
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Budgets and rate limits answer every run as the plain model does, through any clock advances.
    #[test]
    fn the_meter_answers_as_the_model(policy in policy(), ops in prop::collection::vec(op(), 1..80)) {
        let mut meter = Meter::new(&policy);
        let mut model = Model { costs: Vec::new(), buckets: vec![None; policy.rate_limits.len()] };
        // Start far from zero, as the wall clock does.
        let mut now = Duration::from_secs(1_700_000_000);
        for op in ops {
            match op {
                Op::Advance(ms) => now += Duration::from_millis(ms),
                Op::Run { action, approved, cost } => {
                    let got = verdict(meter.admit(&policy, ACTIONS[action], now, approved));
                    let want = model.admit(&policy, action, now.as_nanos() as u64, approved);
                    prop_assert_eq!(&got, &want, "running {} at {:?}", ACTIONS[action], now);
                    if got == Verdict::Pass {
                        let id = ActionId::new(ACTIONS[action]).expect("a valid id");
                        meter.spend(&id, f64::from(cost), now);
                        if cost > 0 {
                            model.costs.push((now.as_nanos() as u64, action, f64::from(cost)));
                        }
                    }
                }
            }
        }
    }
}

/// A budget spent refuses with a typed error that says what was spent of what; the window moving on frees it.
#[test]
fn a_spent_budget_refuses_until_the_window_moves_on() {
    let budget = Budget {
        actions: Pattern::new("**").expect("a valid pattern"),
        limit: 10.0,
        window: Duration::from_secs(60),
        when_spent: WhenSpent::Refuse,
    };
    let policy = Policy::default().budget(budget);
    let mut meter = Meter::new(&policy);
    let start = Duration::from_secs(1000);
    let action = ActionId::new("llm.model.chat").expect("a valid id");
    assert_eq!(meter.admit(&policy, action.as_str(), start, false), Metered::Pass);
    meter.spend(&action, 12.5, start);
    let Metered::Refuse(ActionError::BudgetExceeded { reason }) = meter.admit(&policy, action.as_str(), start, false)
    else {
        panic!("expected a refusal for the spent budget")
    };
    assert!(reason.contains("12.5 spent of 10"), "{reason}");
    assert_eq!(meter.admit(&policy, action.as_str(), start + Duration::from_secs(61), false), Metered::Pass);
}

/// A new policy keeps what was spent, and a rate limit that did not change keeps its state.
#[test]
fn renewing_keeps_spending_and_unchanged_limits() {
    let limit = RateLimit {
        actions: Pattern::new("**").expect("a valid pattern"),
        runs: NonZeroU32::MIN,
        per: Duration::from_secs(10),
        when_limited: WhenLimited::Refuse,
    };
    let policy = Policy::default().rate_limit(limit);
    let mut meter = Meter::new(&policy);
    let now = Duration::from_secs(5);
    assert_eq!(meter.admit(&policy, "a.b", now, false), Metered::Pass);
    let renewed = policy.clone().approval_at(None);
    meter.renew(&renewed);
    assert!(matches!(meter.admit(&renewed, "a.b", now, false), Metered::Refuse(ActionError::RateLimited { .. })));
}
