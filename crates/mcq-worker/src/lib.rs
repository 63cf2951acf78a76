//! Stateless mcq workers: claim tasks, run the kernel on rayon, renew leases, shut down gracefully
