// The registry and dat.conf name the provider by its soname, as for DAPL's.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdaplsock.so.2");
}
