// The registry and dat.conf name the provider by its soname, as for DAPL's.
// The one C file unpacks dat_extension_op's va_list (see csrc/).
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdaplibv.so.2");
    println!("cargo:rerun-if-changed=csrc/extension_args.c");
    cc::Build::new()
        .file("csrc/extension_args.c")
        .include("../include")
        .warnings(true)
        .extra_warnings(true)
        .compile("daplibv_extension_args");
}
