//! The typed intermediate representation under the builder, and the checks of
//! XLA protos that come from outside.

pub mod check_proto;
