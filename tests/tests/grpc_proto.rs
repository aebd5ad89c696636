//! Real input: the code humus-build generated from Debian's `grpc-proto`
//! files (see `build.rs`) compiled; its descriptors name the methods as
//! gRPC does, and its typed clients take the generated messages.

// Needs Debian's grpc-proto; without it, tests/grpc_proto_missing.rs says so.
#![cfg(grpc_proto)]

use humus::grpc::client::RpcKind;
use humus_tests::grpc_proto::grpc::channelz::v1::channelz_humus;
use humus_tests::grpc_proto::grpc::health::v1::{HealthCheckRequest, health_humus};
use humus_tests::grpc_proto::grpc::reflection::v1::server_reflection_humus;
use humus_tests::grpc_proto::grpc::testing::{
    self as testing, load_balancer_stats_service_humus, test_service_humus,
    xds_update_client_configure_service_humus,
};
use humus_tests::grpc_proto::helloworld::{HelloRequest, greeter_humus};

#[test]
fn descriptors_name_methods_as_grpc_does() {
    let unary = test_service_humus::TestServiceProtoClient::UNARY_CALL;
    assert_eq!(unary.full_name, "/grpc.testing.TestService/UnaryCall");
    assert_eq!(unary.point, "grpc:grpc.testing.TestService/UnaryCall");
    assert_eq!(unary.kind, RpcKind::Unary);
    assert_eq!(
        test_service_humus::TestServiceProtoClient::FULL_DUPLEX_CALL.kind,
        RpcKind::Streaming
    );
    assert_eq!(
        test_service_humus::TestServiceProtoClient::STREAMING_INPUT_CALL.kind,
        RpcKind::ClientStreaming
    );
    assert_eq!(
        test_service_humus::TestServiceProtoClient::STREAMING_OUTPUT_CALL.kind,
        RpcKind::ServerStreaming
    );
    assert_eq!(test_service_humus::TestServiceProtoClient::METHODS.len(), 8);

    assert_eq!(
        health_humus::HealthProtoClient::CHECK.full_name,
        "/grpc.health.v1.Health/Check"
    );
    assert_eq!(
        health_humus::HealthProtoClient::WATCH.kind,
        RpcKind::ServerStreaming
    );
    assert_eq!(
        server_reflection_humus::ServerReflectionProtoClient::SERVER_REFLECTION_INFO.full_name,
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
    );
    assert_eq!(
        greeter_humus::GreeterProtoClient::SAY_HELLO.point,
        "grpc:helloworld.Greeter/SayHello"
    );
    assert_eq!(channelz_humus::ChannelzProtoClient::METHODS.len(), 7);
    assert_eq!(
        load_balancer_stats_service_humus::LoadBalancerStatsServiceProtoClient::GET_CLIENT_STATS
            .full_name,
        "/grpc.testing.LoadBalancerStatsService/GetClientStats"
    );
    assert_eq!(
        xds_update_client_configure_service_humus::XdsUpdateClientConfigureServiceProtoClient::CONFIGURE.full_name,
        "/grpc.testing.XdsUpdateClientConfigureService/Configure"
    );
}

#[test]
fn nothing_is_annotated_so_every_method_has_the_defaults() {
    let all = test_service_humus::TestServiceProtoClient::METHODS
        .iter()
        .chain(health_humus::HealthProtoClient::METHODS)
        .chain(channelz_humus::ChannelzProtoClient::METHODS);
    for method in all {
        assert!(!method.policy.never_retry, "{}", method.full_name);
        assert!(method.policy.table.is_empty(), "{}", method.full_name);
        assert!(method.policy.classify.is_none(), "{}", method.full_name);
    }
}

/// The typed clients take the generated messages (compiled, not run).
#[allow(dead_code)]
async fn calls(client: humus::grpc::client::Client) -> Result<(), tonic::Status> {
    let greeter = greeter_humus::GreeterProtoClient::new(client.clone());
    let _reply = greeter.say_hello(HelloRequest::default()).await?;
    let health = health_humus::HealthProtoClient::new(client.clone());
    let _status = health.check(HealthCheckRequest::default()).await?;
    let mut watch = health
        .watch(HealthCheckRequest::default())
        .await?
        .into_inner();
    let _next = watch.message().await?;
    let test = test_service_humus::TestServiceProtoClient::new(client);
    let _empty = test.empty_call(testing::Empty::default()).await?;
    let _sum = test
        .streaming_input_call(tokio_stream::iter(vec![
            testing::StreamingInputCallRequest::default(),
        ]))
        .await?;
    Ok(())
}
