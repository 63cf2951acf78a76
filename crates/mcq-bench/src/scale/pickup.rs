//! Pickup latency: how long a free slot waits for its next task.

/// The gaps (ms) between a slot coming free and a task starting, from one
/// worker's task spans `(start, end)` in ms. Each start takes the end that
/// has waited longest before it (a free slot is a free slot, whichever
/// task left it); starts with no earlier free end are the worker's first
/// tasks and have no gap, ends never followed by a start are the run's
/// tail.
pub(crate) fn gaps(spans: &[(f64, f64)]) -> Vec<f64> {
    let mut starts: Vec<f64> = spans.iter().map(|s| s.0).collect();
    let mut ends: Vec<f64> = spans.iter().map(|s| s.1).collect();
    starts.sort_by(f64::total_cmp);
    ends.sort_by(f64::total_cmp);
    let mut gaps = Vec::with_capacity(starts.len());
    // Ends before `next_end` have come free; those before `taken` are used.
    let (mut next_end, mut taken) = (0, 0);
    for start in starts {
        while next_end < ends.len() && ends[next_end] <= start {
            next_end += 1;
        }
        if taken < next_end {
            gaps.push(start - ends[taken]);
            taken += 1;
        }
    }
    gaps
}

#[cfg(test)]
mod tests {
    use super::gaps;

    #[test]
    fn one_slot_waits_between_its_tasks() {
        let spans = [(0.0, 50.0), (52.0, 102.0), (110.0, 160.0)];
        assert_eq!(gaps(&spans), [2.0, 8.0]);
    }

    #[test]
    fn two_slots_hand_each_start_the_longest_free_end() {
        // Slots end at 50 and 60; the next starts at 61 and 70.
        let spans = [(0.0, 50.0), (10.0, 60.0), (61.0, 111.0), (70.0, 120.0)];
        assert_eq!(gaps(&spans), [11.0, 10.0]);
    }

    #[test]
    fn first_tasks_and_the_tail_have_no_gap() {
        assert!(gaps(&[]).is_empty());
        assert!(gaps(&[(5.0, 55.0)]).is_empty());
        // Back to back on one slot: a zero gap, counted.
        assert_eq!(gaps(&[(0.0, 50.0), (50.0, 100.0)]), [0.0]);
    }
}
