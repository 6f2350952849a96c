// Bind the rdma-core that is installed on the system (libibverbs-dev and
// librdmacm-dev, rdma-core 44 or newer) instead of vendoring a copy: the
// provider must talk to the same libibverbs/librdmacm, and the same kernel
// ABI, as every other RDMA program on the machine.  bindgen's layout tests
// prove the Rust structs match what the C compiler sees in those headers.
use std::env;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rustc-link-lib=ibverbs");
    println!("cargo:rustc-link-lib=rdmacm");

    let bindings = bindgen::Builder::default()
        .header(manifest.join("wrapper.h").to_string_lossy())
        .allowlist_type("_?ibv_.*|verbs_.*|rdma_.*|_compat_ibv_port_attr")
        .allowlist_function("_*ibv_.*|rdma_.*")
        .allowlist_var("_*IBV_.*|RDMA_.*|RAI_.*")
        // Inline wrappers in src/inline.rs take these names; the exported
        // compat symbol is declared there under another name.
        .blocklist_function("ibv_query_port")
        // Share the libc definitions, so callers can hand libc::sockaddr_in
        // and friends straight to rdma_cm.
        .blocklist_type(
            "sockaddr|sockaddr_in|sockaddr_in6|sockaddr_storage|in_addr|in6_addr|\
             sa_family_t|in_port_t|in_addr_t|socklen_t|pthread_mutex_t|pthread_cond_t|\
             pthread_mutexattr_t|pthread_condattr_t|timespec|addrinfo|\
             __pthread_.*|__atomic_wide_counter.*|in6_addr__.*",
        )
        .raw_line(
            "pub use libc::{sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage, in_addr, \
             in6_addr, sa_family_t, in_port_t, in_addr_t, socklen_t, pthread_mutex_t, \
             pthread_cond_t, timespec, addrinfo};",
        )
        // C enums become `type E = c_uint` plus one const per enumerator,
        // without the enum name in front: flag words OR together, and
        // opcode/state values drop straight into the C struct fields.
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .derive_debug(false)
        .size_t_is_usize(true)
        .rust_edition(bindgen::RustEdition::Edition2024)
        .wrap_unsafe_ops(true)
        .layout_tests(true)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .expect("bindgen could not read the rdma-core headers (install libibverbs-dev and librdmacm-dev)");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("rdma_bindings.rs");
    bindings.write_to_file(out).expect("write bindings");
}
