//! A `ConcurrencyLimiter` without a wait queue, built at run time (its options validated), asked for a
//! count read at run time, the lease dropped.
#![no_std]
#![no_main]
tollgate_firmware_size::runtime_program!(ConcurrencyLimiter, ConcurrencyOptions::new(10));
