// The README's Rust example: rlx from a Rust program.
fn main() -> Result<(), rlx::Error> {
    let world = rlx::Group::init("any", false)?; // the launcher's group, or a group of one
    let mut grad = vec![1.0f32, 2.0, 3.0, world.rank() as f32];
    world.all_sum(&mut grad)?; // in place, across every rank

    // Point-to-point around the ring; a failure is an Err naming its kind.
    let (right, left) = (
        (world.rank() + 1) % world.size(),
        (world.rank() + world.size() - 1) % world.size(),
    );
    world.send_bytes(right, 7, b"hello")?;
    let greeting = world.recv_bytes(left, 7)?;
    println!(
        "rank {} of {}: grad = {:?}, {} from rank {left}",
        world.rank(),
        world.size(),
        grad,
        String::from_utf8_lossy(&greeting)
    );
    Ok(())
}
