//! Compiles proto/qdrant.proto (Qdrant's gRPC contract) into the tonic services and prost
//! messages of `grpc::api`, in Rust: no `protoc` on the build machine.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/qdrant.proto");
    let descriptors = protox::compile(["proto/qdrant.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // an RPC of the contract not served yet answers UNIMPLEMENTED
        .generate_default_stubs(true)
        .compile_fds(descriptors)?;
    Ok(())
}
