//! Workers on a real embedded store: the loop waits instead of spinning,
//! hands work to an idle worker, and records a lone result at once.

mod common;
mod hand_off;
mod loop_turns;
mod recording;
