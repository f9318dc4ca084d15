//! Every call of the crate on every rank of a job of any size: `cargo test`
//! runs it as a group of one, tests/run_rust_tests.sh under rlxrun -n 3. One
//! test, so one thread issues the collectives.
use rlx::{ErrorKind, Group, Op};

fn collectives(world: &Group) -> rlx::Result<()> {
    let (rank, size) = (world.rank(), world.size());
    let mut sums = vec![rank as f32 + 1.0, 1.0];
    world.all_sum(&mut sums)?;
    assert_eq!(sums, vec![(size * (size + 1) / 2) as f32, size as f32]);
    let mut highest = [rank as i64, -(rank as i64)];
    world.all_reduce(&mut highest, Op::Max)?;
    assert_eq!(highest, [size as i64 - 1, 0]);

    let mut everyone = vec![0i32; 2 * size as usize];
    world.all_gather(&[rank, rank * rank], &mut everyone)?;
    for r in 0..size {
        assert_eq!(&everyone[2 * r as usize..2 * r as usize + 2], &[r, r * r]);
    }

    let blocks: Vec<f64> = (0..size).map(|b| (rank + 10 * b) as f64).collect();
    let mut mine = [0.0f64];
    world.reduce_scatter(&blocks, &mut mine, Op::Sum)?;
    assert_eq!(mine[0], (size * (size - 1) / 2 + 10 * rank * size) as f64);

    let mut shared = if rank == 0 { [42u8, 7] } else { [0, 0] };
    world.broadcast(&mut shared, 0)?;
    assert_eq!(shared, [42, 7]);

    let outgoing: Vec<i32> = (0..size).map(|j| rank * 100 + j).collect();
    let mut incoming = vec![0i32; size as usize];
    world.all_to_all(&outgoing, &mut incoming)?;
    assert_eq!(
        incoming,
        (0..size).map(|i| i * 100 + rank).collect::<Vec<_>>()
    );

    let mut total = [rank];
    world.reduce(&mut total, Op::Sum, 0)?;
    if rank == 0 {
        assert_eq!(total[0], size * (size - 1) / 2);
    }
    let mut gathered = vec![-1i32; size as usize];
    world.gather(&[rank], (rank == 0).then_some(&mut gathered[..]), 0)?;
    if rank == 0 {
        assert_eq!(gathered, (0..size).collect::<Vec<_>>());
    }
    let shares: Vec<i32> = (0..size).map(|r| 1000 + r).collect();
    let mut share = [0i32];
    world.scatter((rank == 0).then_some(&shares[..]), &mut share, 0)?;
    assert_eq!(share[0], 1000 + rank);
    // Rank r contributes r + 1 elements of value r.
    let counts: Vec<usize> = (0..size as usize).map(|r| r + 1).collect();
    let mut uneven = vec![-1i32; counts.iter().sum()];
    world.all_gather_v(&vec![rank; rank as usize + 1], &mut uneven, &counts)?;
    let expected: Vec<i32> = (0..size).flat_map(|r| vec![r; r as usize + 1]).collect();
    assert_eq!(uneven, expected);
    // Refused on every rank alike, before anything is sent.
    let extra = world
        .all_gather_v(&[rank], &mut uneven, &[1; 17])
        .unwrap_err();
    assert_eq!(extra.kind, ErrorKind::InvalidArgument, "{extra}");
    assert!(extra.message.contains("17 counts"), "{extra}");

    // Rank i sends j + 1 elements of value 10 i + j to rank j.
    let sends: Vec<usize> = (0..size as usize).map(|j| j + 1).collect();
    let receives = vec![rank as usize + 1; size as usize];
    let outgoing: Vec<i64> = (0..size)
        .flat_map(|j| vec![(10 * rank + j) as i64; j as usize + 1])
        .collect();
    let mut incoming = vec![0i64; receives.iter().sum()];
    world.all_to_all_v(&outgoing, &sends, &mut incoming, &receives)?;
    let expected: Vec<i64> = (0..size)
        .flat_map(|i| vec![(10 * i + rank) as i64; rank as usize + 1])
        .collect();
    assert_eq!(incoming, expected);

    let (cast, _) = world
        .ibroadcast(vec![if rank == 0 { 9u8 } else { 0 }; 3], 0)?
        .wait()?;
    assert_eq!(cast, vec![9, 9, 9]);
    world.ibarrier()?.wait()?;

    let n = size as usize;
    let ((_, gathered), _) = world
        .iall_gather(vec![rank; 2], vec![0i32; 2 * n])?
        .wait()?;
    assert_eq!(
        gathered,
        (0..size).flat_map(|r| [r, r]).collect::<Vec<i32>>()
    );
    let ((_, block), _) = world
        .ireduce_scatter(vec![1.5f64; 3 * n], vec![0.0; 3], Op::Max)?
        .wait()?;
    assert_eq!(block, vec![1.5; 3]);
    let outgoing: Vec<i64> = (0..size).map(|j| (100 * rank + j) as i64).collect();
    let ((_, incoming), _) = world.iall_to_all(outgoing, vec![0i64; n])?.wait()?;
    assert_eq!(
        incoming,
        (0..size)
            .map(|i| (100 * i + rank) as i64)
            .collect::<Vec<i64>>()
    );
    let (reduced, _) = world.ireduce(vec![rank as f32 + 1.0], Op::Sum, 0)?.wait()?;
    if rank == 0 {
        assert_eq!(reduced, vec![(size * (size + 1) / 2) as f32]);
    }
    let root = size - 1;
    let output = (rank == root).then(|| vec![0u8; n]);
    let ((_, gathered), _) = world.igather(vec![rank as u8], output, root)?.wait()?;
    if rank == root {
        assert_eq!(
            gathered,
            Some((0..size).map(|r| r as u8).collect::<Vec<u8>>())
        );
    }
    let input = (rank == 0).then(|| (0..2 * size).collect::<Vec<i32>>());
    let ((_, part), _) = world.iscatter(input, vec![0i32; 2], 0)?.wait()?;
    assert_eq!(part, vec![2 * rank, 2 * rank + 1]);
    let counts: Vec<usize> = (0..n).map(|r| r + 1).collect();
    let ((_, uneven, _), _) = world
        .iall_gather_v(
            vec![rank; rank as usize + 1],
            vec![0i32; n * (n + 1) / 2],
            counts,
        )?
        .wait()?;
    let expected: Vec<i32> = (0..size).flat_map(|r| vec![r; r as usize + 1]).collect();
    assert_eq!(uneven, expected);
    let sends: Vec<usize> = (0..n).map(|j| j + 1).collect();
    let outgoing: Vec<i64> = (0..size)
        .flat_map(|j| vec![(10 * rank + j) as i64; j as usize + 1])
        .collect();
    let ((_, _, incoming, _), _) = world
        .iall_to_all_v(
            outgoing,
            sends,
            vec![0i64; n * (rank as usize + 1)],
            vec![rank as usize + 1; n],
        )?
        .wait()?;
    let expected: Vec<i64> = (0..size)
        .flat_map(|i| vec![(10 * i + rank) as i64; rank as usize + 1])
        .collect();
    assert_eq!(incoming, expected);
    let short = world
        .iall_gather_v(vec![rank], vec![0i32; 1], vec![1; 3 * n])
        .unwrap_err();
    assert!(short.message.contains("counts"), "{short}");
    let wrong = world.iall_gather(vec![1i32; 2], vec![0; 1]).unwrap_err();
    assert_eq!(wrong.kind, ErrorKind::InvalidArgument, "{wrong}");
    world.barrier()
}

fn point_to_point(world: &Group) -> rlx::Result<()> {
    let (rank, size) = (world.rank(), world.size());
    let (right, left) = ((rank + 1) % size, (rank + size - 1) % size);
    world.send_bytes(right, 7, format!("from {rank}").as_bytes())?;
    assert_eq!(
        world.recv_bytes(left, 7)?,
        format!("from {left}").into_bytes()
    );
    world.send_bytes(right, 8, &[])?;
    assert!(world.recv_bytes(left, 8)?.is_empty());

    // Too small: refused, and the message waits for a receive that fits.
    world.send_bytes(right, 9, &[1, 2, 3, 4])?;
    let mut small = [0u8; 2];
    let refused = world.recv_bytes_into(left, 9, &mut small).unwrap_err();
    assert_eq!(refused.kind, ErrorKind::InvalidArgument, "{refused}");
    let mut fits = [0u8; 8];
    assert_eq!(world.recv_bytes_into(left, 9, &mut fits)?, 4);

    // A receive posted before its send; 100 KiB runs in the background.
    let receive = world.irecv(left, 10, vec![0u8; 100 * 1024])?;
    let payload: Vec<u8> = (0..100 * 1024)
        .map(|i| (i * 7 + rank as usize) as u8)
        .collect();
    let send = world.isend(right, 10, payload)?;
    let (sent, _) = send.wait()?;
    assert_eq!(sent.len(), 100 * 1024);
    let (arrived, length) = receive.wait()?;
    assert_eq!(length, 100 * 1024);
    assert!(arrived
        .iter()
        .enumerate()
        .all(|(i, &b)| b == (i * 7 + left as usize) as u8));

    // A request that fails in test() fails in wait() too; its message stays.
    world.send_bytes(right, 11, &[1, 2, 3, 4])?;
    let mut short = world.irecv(left, 11, vec![0u8; 2])?;
    let failed = loop {
        match short.test() {
            Ok(false) => continue,
            Ok(true) => panic!("a 4-byte message fit a 2-byte buffer"),
            Err(error) => break error,
        }
    };
    assert_eq!(failed.kind, ErrorKind::InvalidArgument, "{failed}");
    assert_eq!(short.wait().unwrap_err(), failed);
    assert_eq!(world.recv_bytes(left, 11)?, vec![1, 2, 3, 4]);

    let mut pending = world.iall_reduce(vec![1i64, rank as i64], Op::Sum)?;
    while !pending.test()? {}
    let (reduced, _) = pending.wait()?;
    assert_eq!(reduced, vec![size as i64, (size * (size - 1) / 2) as i64]);
    Ok(())
}

fn split(world: &Group) -> rlx::Result<()> {
    let (rank, size) = (world.rank(), world.size());
    // Odd and even ranks, each in descending order of world rank.
    let half = world
        .split(Some(rank % 2), -rank)?
        .expect("every rank has a color");
    assert_eq!(half.size(), (size - rank % 2 + 1) / 2);
    assert_eq!(half.rank(), (size - 1 - rank) / 2);
    let mut total = [rank];
    half.all_sum(&mut total)?;
    assert_eq!(total[0], (rank % 2..size).step_by(2).sum::<i32>());
    let rest = world.split(if rank == 0 { None } else { Some(0) }, 0)?;
    assert_eq!(rest.is_none(), rank == 0);
    Ok(())
}

fn errors(world: &Group) {
    let size = world.size();
    let mut one = [1.0f32];
    let bad_root = world.broadcast(&mut one, size).unwrap_err();
    assert_eq!(bad_root.kind, ErrorKind::InvalidArgument);
    assert!(bad_root.message.contains("broadcast"), "{bad_root}");
    let short = world.all_gather(&[1i32, 2], &mut [0i32; 1]).unwrap_err();
    assert_eq!(short.kind, ErrorKind::InvalidArgument);
    assert!(
        short
            .message
            .contains("all_gather: output holds 1 elements"),
        "{short}"
    );
    let tag = world.send_bytes(0, 1 << 24, b"x").unwrap_err();
    assert!(tag.message.contains("above the largest user tag"), "{tag}");
    assert_eq!(
        world.split(Some(-2), 0).unwrap_err().kind,
        ErrorKind::InvalidArgument
    );

    // Ranks that call different sizes all fail as a mismatch; that group
    // stays failed, the world goes on.
    if size > 1 {
        let copy = world.split(Some(0), 0).unwrap().unwrap();
        // Every rank has its handle before any fails the group (a rank still
        // setting it up would fail its split with the relayed mismatch).
        world.barrier().unwrap();
        let mut values = vec![0.0f32; if world.rank() == 0 { 4 } else { 5 }];
        let mismatch = copy.all_sum(&mut values).unwrap_err();
        assert_eq!(mismatch.kind, ErrorKind::Mismatch, "{mismatch}");
        assert!(mismatch.message.contains("all_reduce"), "{mismatch}");
        assert!(copy.barrier().is_err());
        world.barrier().unwrap();
    }
}

#[test]
fn every_call_on_every_rank() {
    assert_eq!(rlx::version(), env!("CARGO_PKG_VERSION"));
    let world = Group::init("any", false).unwrap();
    collectives(&world).unwrap();
    point_to_point(&world).unwrap();
    split(&world).unwrap();
    errors(&world);
    println!(
        "rank {} of {} ({}) ok",
        world.rank(),
        world.size(),
        world.backend()
    );
    drop(world);
    rlx::finalize().unwrap();
    assert_eq!(
        Group::init("any", false).err().map(|e| e.kind),
        Some(ErrorKind::InvalidArgument)
    );
}
