//! A runnable consumer: takes jobs off a queue and prints them.
//!
//!   cargo run -p queue-consumer-example -- "host=/tmp user=postgres" emails [--drain]
//!
//! A job whose payload has `"fail": "some error"` fails (and is retried by
//! the queue's policy); `"work_ms": n` works for n milliseconds, extending
//! its lease every second. With --drain the loop ends once the queue is
//! empty; otherwise it runs until interrupted.

use std::time::{Duration, Instant};

use queue_consumer_example::{Consumer, Outcome};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(conninfo), Some(queue)) = (args.first(), args.get(1)) else {
        eprintln!("usage: queue-consumer-example CONNINFO QUEUE [--drain]");
        std::process::exit(2);
    };
    let drain = args.iter().any(|a| a == "--drain");
    let mut client = postgres::Client::connect(conninfo, postgres::NoTls)?;
    let consumer = Consumer::new(queue, &format!("example-{}", std::process::id()));
    let total = consumer.run(
        &mut client,
        |job, lease| {
            println!(
                "job {} (attempt {}/{}): {}",
                job.id, job.attempt, job.max_attempts, job.payload
            );
            let payload: serde_json::Value = serde_json::from_str(&job.payload).unwrap_or_default();
            if let Some(error) = payload["fail"].as_str() {
                return Outcome::Retry {
                    error: error.to_string(),
                    retry_in: None,
                };
            }
            if let Some(ms) = payload["work_ms"].as_u64() {
                let until = Instant::now() + Duration::from_millis(ms);
                while let Some(left) = until.checked_duration_since(Instant::now()) {
                    std::thread::sleep(left.min(Duration::from_secs(1)));
                    if !lease.extend(Duration::from_secs(30)).unwrap_or(false) {
                        // someone else has the job now: leave it to them
                        return Outcome::Retry {
                            error: "lease lost".into(),
                            retry_in: None,
                        };
                    }
                }
            }
            Outcome::Done
        },
        |round| !(drain && round.claimed == 0),
    )?;
    println!("{total:?}");
    Ok(())
}
