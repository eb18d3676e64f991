//! An informer's Prometheus metrics (`InformerMetricsProvider`) and the ready-made
//! `strip_managed_fields` transform, on the simulator.

mod support;

use std::time::Duration;

use informer::{
    HandlerFns, HandlerOptions, Informer, InformerConfig, InformerMetricsProvider,
    strip_managed_fields,
};
use prometheus_client::encoding::text::encode;
use support::sim;

/// The value of the sample `line_start` (metric name and labels) in a text exposition.
fn sample(text: &str, line_start: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(line_start)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {line_start} in\n{text}"))
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_report_queue_store_latency_handlers_and_reflector() {
    let sim = sim("head", |c| c.initial_objects(50).target_objects(50));
    let (registry, metrics) = InformerMetricsProvider::new_registry();
    let config = InformerConfig {
        name: Some("pods".into()),
        ..Default::default()
    };
    let informer = Informer::new(sim.clone(), config);
    informer.report_metrics_to(&metrics);
    informer.report_metrics_to(&metrics); // once per provider
    for name in ["a", "b"] {
        informer
            .add_event_handler(HandlerFns::new(), HandlerOptions::new().name(name))
            .unwrap();
    }
    informer.start(&tokio::runtime::Handle::current());
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    let rv = sim.flood(1_000).await.unwrap();
    informer.store().wait_for(rv).await.unwrap();
    tokio::task::block_in_place(|| informer.flush());

    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    assert_eq!(
        text.matches("informer_queued_items{name=\"pods\"}").count(),
        1,
        "reported once: {text}"
    );
    assert_eq!(
        sample(&text, "informer_store_resource_version{name=\"pods\"}"),
        informer.last_store_sync_resource_version() as f64
    );
    assert_eq!(informer.last_store_sync_resource_version(), rv);
    assert_eq!(sample(&text, "informer_queued_items{name=\"pods\"}"), 0.0);
    let batches = sample(
        &text,
        "informer_processing_latency_seconds_count{name=\"pods\"}",
    );
    assert!(batches >= 1.0, "{text}");
    assert_eq!(
        sample(
            &text,
            "informer_processing_latency_seconds_bucket{le=\"+Inf\",name=\"pods\"}"
        ),
        batches
    );
    for h in ["a", "b"] {
        assert_eq!(
            sample(
                &text,
                &format!("informer_handler_pending{{name=\"pods\",handler=\"{h}\"}}")
            ),
            0.0
        );
    }
    assert!(sample(&text, "informer_reflector_lists_total{name=\"pods\"}") >= 1.0);
    assert!(sample(&text, "informer_reflector_watches_total{name=\"pods\"}") >= 1.0);
    assert!(sample(&text, "informer_reflector_events_total{name=\"pods\"}") >= 1_000.0);
    assert_eq!(
        sample(&text, "informer_reflector_errors_total{name=\"pods\"}"),
        0.0
    );

    // A dropped informer is no longer reported.
    tokio::task::block_in_place(|| drop(informer));
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    assert!(!text.contains("name=\"pods\""), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strip_managed_fields_applies_to_the_initial_list_and_every_event() {
    let sim = sim("head", |c| c.initial_objects(30).target_objects(30));
    let with = sim.truth().objects.values().next().unwrap().clone();
    assert!(
        !with.meta().managed_fields().is_empty(),
        "the simulator's objects carry managed fields"
    );
    let informer = Informer::new(sim.clone(), InformerConfig::default());
    informer.set_transform(strip_managed_fields).unwrap();
    informer.start(&tokio::runtime::Handle::current());
    informer
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .unwrap();
    let initial = informer.lister().list();
    assert_eq!(initial.len(), 30);
    let rv = sim.flood(300).await.unwrap();
    informer.store().wait_for(rv).await.unwrap();
    let all = informer.lister().list();
    assert!(!all.is_empty());
    for obj in initial.iter().chain(all.iter()) {
        assert!(obj.meta().managed_fields().is_empty(), "{}", obj.key());
        let truth = &sim.truth().objects;
        if let Some(t) = truth.get(obj.key_ref())
            && t.resource_version() == obj.resource_version()
        {
            assert!(obj.raw_len() < t.raw_len(), "smaller than the server's");
        }
    }
    tokio::task::block_in_place(|| informer.shutdown());
}
