// Links librlx_c.so from RLX_LIB_DIR (a build's lib/ folder, or an install's
// lib/), and records that folder as the run-time search path.
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=RLX_LIB_DIR");
    let dir = std::env::var("RLX_LIB_DIR").unwrap_or_else(|_| {
        panic!("set RLX_LIB_DIR to the folder that holds librlx_c.so (build/release/lib)")
    });
    if !Path::new(&dir).join("librlx_c.so").exists() {
        panic!("RLX_LIB_DIR={dir} holds no librlx_c.so: build rlx first (cmake --build --preset release)");
    }
    println!("cargo:rustc-link-search=native={dir}");
    println!("cargo:rustc-link-lib=dylib=rlx_c");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
}
