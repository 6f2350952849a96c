// Compiles the one C entry point Rust cannot express (a variadic function).
fn main() {
    println!("cargo:rerun-if-changed=csrc/extension_op.c");
    cc::Build::new()
        .file("csrc/extension_op.c")
        .include("../include")
        .warnings(true)
        .extra_warnings(true)
        .compile("dat_extension_op");
}
