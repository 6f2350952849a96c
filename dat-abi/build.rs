// The Rust view of the DAT types is generated from include/dat2, so the C
// headers stay the single description of the ABI; bindgen's layout tests then
// prove the Rust structs match what a C compiler sees.
use std::env;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let include = manifest.join("../include");
    let dat2 = include.join("dat2");
    println!("cargo:rerun-if-changed={}", dat2.display());
    println!("cargo:rerun-if-changed=wrapper.h");

    let bindings = bindgen::Builder::default()
        .header(manifest.join("wrapper.h").to_string_lossy())
        .clang_arg(format!("-I{}", include.display()))
        .allowlist_type("[Dd][Aa][Tt]_.*|dats_.*")
        .allowlist_var("[Dd][Aa][Tt]_.*")
        .allowlist_function("[Dd][Aa][Tt]_.*|dats_.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .derive_debug(false)
        .layout_tests(true)
        // Masks like DAT_EP_FIELD_* are written with UINT64_C(), which only
        // clang itself can evaluate.
        .clang_macro_fallback()
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .expect("bindgen could not read include/dat2");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("dat_bindings.rs");
    bindings.write_to_file(out).expect("write bindings");
}
