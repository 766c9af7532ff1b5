//! A `LeakyBucketMeter` without a wait queue, a `static` built by a `const fn`, asked for a
//! count read at run time, the lease dropped.
#![no_std]
#![no_main]
tollgate_firmware_size::static_program!(LeakyBucketMeter, LeakyBucketOptions::new(10, 1, Duration::from_millis(100)));
