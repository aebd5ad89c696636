//! `humus-build`: the `build.rs` plugin that compiles `.proto` files with protox and generates prost messages, tonic stubs and typed humus clients.
