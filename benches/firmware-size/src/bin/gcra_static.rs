//! A `GcraLimiter` without a wait queue, a `static` built by a `const fn`, asked for a
//! count read at run time, the lease dropped.
#![no_std]
#![no_main]
tollgate_firmware_size::static_program!(GcraLimiter, GcraOptions::per(Duration::from_secs(1), 10));
