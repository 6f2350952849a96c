// The one C file unpacks dat_extension_op's va_list (see csrc/); it is
// linked into each provider built on the core.
fn main() {
    println!("cargo:rerun-if-changed=csrc/extension_args.c");
    cc::Build::new()
        .file("csrc/extension_args.c")
        .include("../include")
        .warnings(true)
        .extra_warnings(true)
        .compile("daplibv_extension_args");
}
