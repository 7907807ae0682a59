// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "apns-mock",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "apns-mock", targets: ["apns-mock"]),
        .library(name: "APNSMockCore", targets: ["APNSMockCore"]),
        .library(name: "APNSMock", targets: ["APNSMock"]),
        .library(name: "APNSMockTesting", targets: ["APNSMockTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swiftlang/swift-subprocess.git", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        // The shared state of replicas (state.url, docs/replicas.md).
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CNGHTTP2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(
            name: "CAPNSMockShims",
            dependencies: ["COpenSSL", "CNGHTTP2"]
        ),
        .target(
            name: "APNSMockCore",
            dependencies: [
                .product(name: "Yams", package: "Yams"),
            ]
        ),
        .target(
            name: "APNSMock",
            dependencies: [
                "APNSMockCore",
                "CNGHTTP2",
                "COpenSSL",
                "CAPNSMockShims",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                // A stand-in connection for the admin changes a replica applies from the shared log.
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            // The admin API's OpenAPI document, served at /v1/openapi.json: compiled into the
            // binary (no bundle beside it), so the container image and a copied binary serve it too.
            // The inbox page's files are compiled in the same way (InboxPage.swift puts them together).
            resources: [
                .embedInCode("Admin/openapi.json"),
                .embedInCode("Admin/Inbox/inbox.html"),
                .embedInCode("Admin/Inbox/inbox.css"),
                .embedInCode("Admin/Inbox/inbox.js"),
            ]
        ),
        .target(
            name: "APNSMockTesting",
            dependencies: [
                "APNSMock",
                "APNSMockCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // What every command of the executable shares: logging options, console output, key IDs.
        .target(
            name: "APNSMockCommandLine",
            dependencies: [
                "APNSMockCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // `apns-mock send`: a provider, the other side of the wire, with its own HTTP/2 client
        // (swift-nio-http2) and type names. Of the server module it uses only ProviderTokenSigner,
        // so that OpenSSL's ES256 has one owner.
        .target(
            name: "APNSMockSend",
            dependencies: [
                "APNSMock",
                "APNSMockCore",
                "APNSMockCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
        .executableTarget(
            name: "apns-mock",
            dependencies: [
                "APNSMock",
                "APNSMockCore",
                "APNSMockCommandLine",
                "APNSMockSend",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "APNSMockCoreTests",
            dependencies: ["APNSMockCore"]
        ),
        .testTarget(
            name: "APNSMockTests",
            dependencies: [
                "APNSMock",
                "CNGHTTP2",
                "APNSMockCore",
                "APNSMockTesting",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// libFuzzer targets (fuzz/, scripts/fuzz), added only when APNS_MOCK_FUZZ is set: they are built
// with `-sanitize=fuzzer,address -parse-as-library` and start libFuzzer's driver from their own
// entry point (FuzzDriver), which the normal build and test products must not see.
if Context.environment["APNS_MOCK_FUZZ"] != nil {
    let fuzzTargets: [(name: String, dependencies: [Target.Dependency])] = [
        ("FuzzProviderToken", ["APNSMockCore"]),
        ("FuzzPayload", ["APNSMockCore"]),
        ("FuzzConfiguration", ["APNSMockCore"]),
        ("FuzzAdminRequests", ["APNSMock", "APNSMockCore"]),
        ("FuzzHTTP2Session", ["APNSMock", "APNSMockCore"]),
    ]
    package.targets.append(.target(name: "FuzzDriver", path: "fuzz/Sources/FuzzDriver"))
    for target in fuzzTargets {
        package.targets.append(.executableTarget(
            name: target.name, dependencies: target.dependencies + ["FuzzDriver"], path: "fuzz/Sources/\(target.name)"))
        package.products.append(.executable(name: target.name, targets: [target.name]))
    }
}
